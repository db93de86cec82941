// A change token as the server reads it from a pull's `after=` and a client from its cursor: any
// text, parsed; a token that parses is then validated against a zone's epoch and range.
import FuzzSupport
import StrataProtocol

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        [
            ChangeToken(epoch: 1, position: 0),
            ChangeToken(epoch: 0x1234_5678_9ABC, position: 42, generation: 3),
            ChangeToken(epoch: 9, position: 1 << 40, generation: 2, fingerprint: 0xDEAD_BEEF, fingerprintsHistory: false),
            ChangeToken(epoch: 9, position: 17, generation: 1, fingerprint: 77, fingerprintsHistory: true),
        ].map { Array($0.description.utf8) } + [Array("not-a-token".utf8)]
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let text = String(decoding: fuzzBytes(data, size), as: UTF8.self)
    guard let token = try? ChangeToken(parsing: text) else { return 0 }
    _ = try? token.validate(epoch: token.epoch, merges: [token.epoch &+ 1], start: 0, end: token.position)
    _ = try? token.validate(fingerprint: token.fingerprint)
    return 0
}
