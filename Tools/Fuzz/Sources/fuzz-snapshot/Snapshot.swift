// A projection snapshot payload (inside a `.snap` file, an adopted state under `adopted/`, or a
// state pulled from the server) as a store reads it: `ProjectionBuilder(snapshot:)`, then what is
// asked of a decoded state (its newest stamp, its digest and encoding).
import FuzzSupport
import Strata
import StrataCore

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var seeds = try FuzzSeeds.snapshotPayloads()
        seeds.append(try FuzzSeeds.fixture("adopted/device-d/adopted/2348aa20f46c66764bf750761918c6602f196935312d2431a4dcd51b2b0fdf6f.state"))
        let empty = ProjectionBuilder().snapshotPayload()
        seeds.append(empty)
        // The crashes this target found (fixed in the snapshot decoder): a name table that repeats
        // a name, and a replica table that repeats a replica (tables follow the version byte).
        seeds.append([empty[0], 2, 4] + Array("Note".utf8) + [4] + Array("Note".utf8) + [0] + empty[3...])
        seeds.append([empty[0], 0, 2] + Array(repeating: 7, count: 32) + empty[3...])
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let builder = try? ProjectionBuilder(snapshot: fuzzBytes(data, size)) else { return 0 }
    _ = builder.newestTimestamp()
    _ = builder.snapshotPayload()
    return 0
}
