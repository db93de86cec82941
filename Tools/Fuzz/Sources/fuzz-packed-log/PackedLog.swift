// A debug bundle's packed log (`log.pack`, bundle format 2) as `strata` unpacks any bundle it is
// sent: `PackedLog.unpack`, every stream, table reference and count checked, into memory.
import Foundation
import FuzzSupport
@testable import Strata

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        // The packed logs of the golden format-2 bundles (the last file of each).
        try ["device-a.redacted", "device-b.plain", "device-d.redacted"].map { name in
            let bundle = try FuzzSeeds.fixture("bundle-v2/\(name).strata-bundle")
            let length = Int(bundle[12]) | Int(bundle[13]) << 8 | Int(bundle[14]) << 16 | Int(bundle[15]) << 24
            let manifest = try JSONDecoder().decode(DebugBundle.Manifest.self, from: Data(bundle[16..<(16 + length)]))
            guard let last = manifest.files.last, last.path == "log.pack" else { throw SeedError(message: "\(name): log.pack is not the last file") }
            return Array(bundle.suffix(Int(last.size)))
        }
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    _ = try? PackedLog.check(fuzzBytes(data, size))
    return 0
}
