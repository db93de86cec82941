// Push and pull bodies (`application/x-strata-transactions`) as the server and the client split
// them into frames; each frame is then decoded as a transaction, as a push is.
import FuzzSupport
import Strata
import StrataCore
import StrataLog
import StrataProtocol

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        var entries: [[UInt8]] = []
        _ = try SegmentLog.verify(at: FuzzSeeds.fixtures + "/divergent/device-a/log", record: { record in
            entries.append(contentsOf: record.entries.map(\.payload))
        })
        return [
            [],
            TransactionFrames.encode([]),
            TransactionFrames.encode(Array(entries.prefix(1))),
            TransactionFrames.encode(Array(entries.prefix(3))),
            TransactionFrames.encode([[], [0x01], Array(repeating: 0x7F, count: 200)]),
        ]
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let frames = try? TransactionFrames.decode(fuzzBytes(data, size)) else { return 0 }
    for frame in frames {
        _ = try? TransactionRecord(decoding: frame)
    }
    return 0
}
