// An adoption record (the log entry that names a snapshot the store adopted) as the readers of a
// log decode it: directly, and through the transaction header every indexing reader reads first.
import FuzzSupport
@testable import Strata
@testable import StrataCore

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        let adoptions = try FuzzSeeds.entries().filter { AdoptionRecord.isAdoption($0) }
        guard let real = adoptions.first else { throw SeedError(message: "no adoption record in the golden logs \(FuzzSeeds.logs)") }
        // The real one, then the same truncated and with a longer origin.
        return [real, Array(real.dropLast(5)), real + [0x41, 0x42], [AdoptionRecord.entryFormat]]
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = fuzzBytes(data, size)
    _ = try? AdoptionRecord(decoding: bytes, position: 3)
    _ = try? TransactionHeader(decoding: bytes, position: 3)
    return 0
}
