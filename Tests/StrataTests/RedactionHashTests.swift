import Crypto
import Foundation
import StrataTestSupport
import Testing
@testable import StrataCore

/// A redacted bundle's values are HMAC-SHA-256 under the user's key: the values two bundles made
/// with one key hold must not change between releases (they are compared value by value), and
/// the keyed hash must be the standard HMAC (its pad states are computed once per key).
@Suite("Redaction's keyed hash")
struct RedactionHashTests {
    /// Computed with Python's `hmac` (key bytes 0…31) — outside this code base.
    @Test("redacted values for a fixed key are pinned")
    func pinned() throws {
        let redaction = try ValueRedaction(key: Array(0..<32))
        #expect(redaction.keyID == "4802bf5ab0b2ced2")
        #expect(redaction.redact(.string("Milk")) == .string("h:79d91f46994dcf5f"))
        let long = String(repeating: "a note with a long enough title to take two blocks of the hash, and then some more text ", count: 3)
        #expect(redaction.redact(.string(long)) == .string("h:169bc8814b43eacf"))
        #expect(redaction.redact(.integer(42)) == .integer(626_224_445_776_394_530))
    }

    @Test("the keyed hash is swift-crypto's HMAC-SHA-256 of the tag and the bytes, for random keys and inputs (seeded)")
    func matchesHMAC() throws {
        let seed = UInt64.random(in: 0 ... .max)
        var random = SeededGenerator(seed: seed)
        for round in 0..<300 {
            let key = (0..<32).map { _ in UInt8.random(in: 0 ... .max, using: &random) }
            let redaction = try ValueRedaction(key: key)
            let tag = UInt8.random(in: 0...9, using: &random)
            let bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0 ... .max, using: &random) }
            let expected = Array(HMAC<SHA256>.authenticationCode(for: [tag] + bytes, using: SymmetricKey(data: key)))
            #expect(redaction.mac(tag: tag, bytes) == expected, "seed \(seed), round \(round), \(bytes.count) bytes")
            // The same key used again starts from the same state (the pad states are not spent).
            #expect(redaction.mac(tag: tag, bytes) == expected, "seed \(seed), round \(round): a second use")
        }
    }
}
