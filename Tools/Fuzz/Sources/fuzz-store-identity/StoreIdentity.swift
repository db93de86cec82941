// A store's identity file (`store.json`, format 1 and the checksummed format 2) as opening a store
// reads it.
import FuzzSupport
@testable import Strata
@testable import StrataCore

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var seeds: [[UInt8]] = []
        for store in ["adopted/device-d", "divergent/device-a", "divergent/device-b"] {
            seeds.append(try FuzzSeeds.fixture(store + "/store.json"))
        }
        seeds.append(Array(#"{"format":1,"replicaID":"d4d40000-0000-0000-0000-000000000004"}"#.utf8))
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    _ = try? StoreIdentityFile.decode(fuzzBytes(data, size), path: "fuzz/store.json")
    return 0
}
