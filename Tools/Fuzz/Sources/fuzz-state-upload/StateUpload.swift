// The body of `POST /v1/zones/{zone}/state` (a device's whole state, uploaded to heal a zone) as
// the server checks it before storage: `StateValidation.validate`.
import FuzzSupport
import Strata
import StrataCore
import StrataServer

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var seeds = try FuzzSeeds.snapshotPayloads()
        seeds.append(try FuzzSeeds.fixture("adopted/device-d/adopted/2348aa20f46c66764bf750761918c6602f196935312d2431a4dcd51b2b0fdf6f.state"))
        // A state whose name table repeats a name: it trapped the server before the snapshot
        // decoder refused it (found by fuzz-snapshot).
        let empty = ProjectionBuilder().snapshotPayload()
        seeds.append([empty[0], 2, 4] + Array("Note".utf8) + [4] + Array("Note".utf8) + [0] + empty[3...])
        return seeds
    }
    return 0
}

/// A fixed server clock (ms since 1970), so that a run is reproducible.
let now: UInt64 = 1_780_000_000_000

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    _ = try? StateValidation.validate(fuzzBytes(data, size), now: now, maxClockOffset: .seconds(60))
    return 0
}
