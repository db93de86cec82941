import HTTPTypes
@testable import StrataServer
import Testing
@testable import StrataProtocol
import StrataCore

@Suite("Change tokens")
struct ChangeTokenTests {
    @Test("a token survives its text form", arguments: [
        (UInt64(0), UInt64(0)), (1, 1), (0xDEAD_BEEF_0123_4567, 42), (.max, .max), (.max, 0), (7, 1 << 40),
    ])
    func roundTrip(epoch: UInt64, position: UInt64) throws {
        let token = ChangeToken(epoch: epoch, position: position)
        let text = token.description
        #expect(text.count == 23)
        #expect(text.utf8.allSatisfy { c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
        })
        #expect(try ChangeToken(parsing: text) == token)
    }

    @Test("the bytes are the version, then epoch and position little-endian")
    func layout() {
        let token = ChangeToken(epoch: 0x0102_0304_0506_0708, position: 0x1112_1314_1516_1718)
        #expect(token.bytes == [1, 8, 7, 6, 5, 4, 3, 2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11])
        #expect(Base64URL.decode(token.description) == token.bytes)
    }

    @Test("text that is not a token is refused as malformed", arguments: [
        "", "!", "AQAAAAAAAAAAAAAAAAAAAAA=", "AQAAAAAAAAAAAAAAAAAAAA", "AQAAAAAAAAAAAAAAAAAAAAAA",
        "AQAAAAAAAAAAAAAAAAAAAA+", "AQAAAAAAAAAAAAAAAAAAAA/", "AQAAAAAAAAAAAAAA AAAAAA", "AgAAAAAAAAAAAAAAAAAAAAA",
        "AQAAAAAAAAAAAAAAAAAAAAB", "notatoken",
    ])
    func malformed(text: String) {
        #expect(throws: ChangeTokenError.self) { try ChangeToken(parsing: text) }
        do {
            _ = try ChangeToken(parsing: text)
        } catch {
            #expect(error.code == .malformed)
            #expect(ServerError(error).code == .badRequest)
        }
    }

    @Test("a token of another epoch, before the start or past the end is refused with the right code")
    func validation() throws {
        let token = ChangeToken(epoch: 5, position: 10)
        try token.validate(epoch: 5, start: 0, end: 10)
        try token.validate(epoch: 5, start: 10, end: 20)
        func code(_ body: () throws(ChangeTokenError) -> Void) -> ChangeTokenError.Code? {
            do { try body(); return nil } catch { return error.code }
        }
        #expect(code { () throws(ChangeTokenError) in try token.validate(epoch: 6, start: 0, end: 20) } == .zoneReset)
        #expect(code { () throws(ChangeTokenError) in try token.validate(epoch: 5, start: 11, end: 20) } == .expired)
        #expect(code { () throws(ChangeTokenError) in try token.validate(epoch: 5, start: 0, end: 9) } == .beyondEnd)
        #expect(ServerError(ChangeTokenError(.zoneReset, "")).code == .zoneReset)
        #expect(ServerError(ChangeTokenError(.expired, "")).code == .tokenExpired)
        #expect(ServerError(ChangeTokenError(.expired, "")).status == .gone)
        #expect(ServerError(ChangeTokenError(.beyondEnd, "")).status == .gone)
        #expect(ServerError(ChangeTokenError(.beyondEnd, "")).code == .zoneRewound)
    }
}

@Suite("Transaction frames")
struct TransactionFramesTests {
    @Test("frames of any length split back into the same transactions")
    func roundTrip() throws {
        let transactions: [[UInt8]] = [[], [1], Array(repeating: 7, count: 127), Array(repeating: 8, count: 128), Array(repeating: 9, count: 70_000)]
        let body = TransactionFrames.encode(transactions)
        #expect(try TransactionFrames.decode(body) == transactions)
        #expect(try TransactionFrames.decode([]) == [])
    }

    @Test("a truncated or overlong frame is refused, naming the frame and where it starts")
    func damaged() {
        let good = TransactionFrames.encode([[1, 2, 3]])
        let cases: [([UInt8], Int, Int)] = [
            (good + [0x80], 1, 4),                      // varint cut short
            (good + [5, 1, 2], 1, 4),                   // announces more than remains
            (good + Array(repeating: 0xFF, count: 11), 1, 4),  // longer than 64 bits
        ]
        for (body, frame, offset) in cases {
            do {
                _ = try TransactionFrames.decode(body)
                Issue.record("accepted \(body)")
            } catch {
                #expect(error.frame == frame)
                #expect(error.offset == offset)
            }
        }
    }
}

@Suite("Change token generations")
struct ChangeTokenGenerationTests {
    @Test("a zone never healed keeps 17-byte version 1 tokens; a later generation writes 25-byte version 2 tokens that round-trip")
    func layout() throws {
        let plain = ChangeToken(epoch: 7, position: 9)
        #expect(plain.bytes.count == 17 && plain.bytes[0] == 1)
        let healed = ChangeToken(epoch: 7, position: 9, generation: 3)
        #expect(healed.bytes.count == 25 && healed.bytes[0] == 2)
        #expect(try ChangeToken(parsing: healed.description) == healed)
        #expect(try ChangeToken(parsing: plain.description).generation == 0)
        // A version 2 token cut to 17 bytes is malformed, not misread.
        let cut = Base64URL.encode(Array(healed.bytes.prefix(17)))
        #expect(throws: ChangeTokenError.self) { try ChangeToken(parsing: cut) }
    }

    @Test("a token of an earlier merge (or of none) is expired, of a merge the zone does not know beyond the end (the server lost it)")
    func validation() throws {
        let merges: [UInt64] = [0x1111, 0x2222]
        func code(_ token: ChangeToken) -> ChangeTokenError.Code? {
            do {
                try token.validate(epoch: 7, merges: merges, start: 0, end: 100)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(ChangeToken(epoch: 7, position: 50, generation: 0x2222)) == nil)
        #expect(code(ChangeToken(epoch: 7, position: 50, generation: 0x1111)) == .expired)
        #expect(code(ChangeToken(epoch: 7, position: 100, generation: 0)) == .expired)
        // The same number of merges, but another one: a server restored and healed again.
        #expect(code(ChangeToken(epoch: 7, position: 50, generation: 0x3333)) == .beyondEnd)
        #expect(code(ChangeToken(epoch: 8, position: 50, generation: 0x2222)) == .zoneReset)
    }

    @Test("a token with a fingerprint is 33 bytes (version 4, of the whole history) and round-trips; a fingerprint that differs from the history before its position is beyond the end (the server was restored and grew past it), an unknown one is not checked")
    func fingerprints() throws {
        let token = ChangeToken(epoch: 7, position: 9, generation: 0, fingerprint: 0xABCDEF)
        #expect(token.bytes.count == 33 && token.bytes[0] == 4)
        #expect(try ChangeToken(parsing: token.description) == token)
        #expect(token.fingerprintsHistory)
        #expect(throws: Never.self) { try token.validate(fingerprint: 0xABCDEF) }
        #expect(throws: Never.self) { try token.validate(fingerprint: nil) }
        #expect(throws: Never.self) { try ChangeToken(epoch: 7, position: 9).validate(fingerprint: 0x1234) }
        do {
            try token.validate(fingerprint: 0x1234)
            Issue.record("a foreign history was accepted")
        } catch {
            #expect(error.code == .beyondEnd)
        }
    }

    @Test("a version 3 token (handed out by an earlier server: the fingerprint of the transaction before its position) is still read, as such, and written back as version 3")
    func version3Tokens() throws {
        // Version 3, epoch 7, position 9, generation 0, fingerprint 0xABCDEF: bytes as documented.
        var bytes: [UInt8] = [3]
        for field: UInt64 in [7, 9, 0, 0xABCDEF] {
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
        }
        let token = try ChangeToken(parsing: ChangeToken(epoch: 7, position: 9, fingerprint: 0xABCDEF, fingerprintsHistory: false).description)
        #expect(token.bytes == bytes)
        #expect(token.epoch == 7 && token.position == 9 && token.fingerprint == 0xABCDEF)
        #expect(!token.fingerprintsHistory)
    }
}
