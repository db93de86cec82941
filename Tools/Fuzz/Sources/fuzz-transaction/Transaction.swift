// A log entry or a pushed frame as every reader of transactions decodes it: the header alone (the
// tools' index), the whole transaction, and applied to a projection (store open, replay, the
// server's heal) through `ProjectionBuilder.apply(encoded:)` and so `EventCodec`.
import FuzzSupport
@testable import Strata
@testable import StrataCore

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        FuzzSeeds.pick(try FuzzSeeds.entries().filter { !AdoptionRecord.isAdoption($0) }, 8)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = fuzzBytes(data, size)
    _ = try? TransactionHeader(decoding: bytes, position: 7)
    _ = try? TransactionRecord(decoding: bytes)
    let builder = ProjectionBuilder()
    _ = try? builder.apply(encoded: bytes, position: 7)
    return 0
}
