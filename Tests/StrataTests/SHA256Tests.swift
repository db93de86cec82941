import Crypto
import Foundation
@testable import Strata
import StrataTestSupport
import Testing
@testable import StrataCore

/// Strata's SHA-256 (the store's digests, adoption records, the identity file's checksum) is
/// the standard's: its test vectors, and swift-crypto's answer for random inputs fed in random pieces.
@Suite("SHA-256")
struct SHA256Tests {
    static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

    @Test("the FIPS 180-4 test vectors, including the padding boundaries at 55, 56 and 64 bytes")
    func vectors() {
        #expect(Self.hex(SHA256Hasher.hash(data: [UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex(SHA256Hasher.hash(data: Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.hex(SHA256Hasher.hash(data: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var million = SHA256Hasher()
        for _ in 0..<1000 { million.update(data: [UInt8](repeating: 0x61, count: 1000)) }
        #expect(Self.hex(million.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("random inputs of every length up to 300 bytes and some large ones, in random pieces, hash as swift-crypto does")
    func matchesSwiftCrypto() {
        let seed = UInt64.random(in: 0 ... .max)
        var random = SeededGenerator(seed: seed)
        var lengths = Array(0...300)
        lengths += [1 << 12, 65_537, 1 << 20]
        for length in lengths {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
            var ours = SHA256Hasher()
            var start = 0
            while start < bytes.count {
                let piece = Int.random(in: 1...max(1, min(200, bytes.count - start)), using: &random)
                ours.update(data: bytes[start..<(start + piece)])
                start += piece
            }
            let theirs = Array(Crypto.SHA256.hash(data: bytes))
            var prefixed = ours
            #expect(ours.finalize() == theirs, "length \(length), seed \(seed)")
            // The fingerprints' 16-byte prefix, read without an array, is the digest's first 16 bytes.
            let (high, low) = prefixed.finalizePrefix128()
            #expect(Fingerprint(high: high, low: low).description == Self.hex(Array(theirs.prefix(16))), "prefix, length \(length), seed \(seed)")
            // The one-call prefix (whole blocks from the input, the tail padded on the stack),
            // with the CPU's instructions and with the portable rounds.
            for hardware in [SHA256Hasher.usesHardware, false] {
                let (oneHigh, oneLow) = bytes.withUnsafeBytes { SHA256Hasher.prefix128(of: $0, hardware: hardware) }
                #expect(Fingerprint(high: oneHigh, low: oneLow).description == Self.hex(Array(theirs.prefix(16))),
                        "one-call prefix, length \(length), hardware \(hardware), seed \(seed)")
            }
            // The same bytes as a Data slice that does not start at 0, with empty pieces, and as a
            // collection with no contiguous storage.
            let padded = Data([0xFF] + bytes)
            var sliced = SHA256Hasher()
            sliced.update(data: padded[(padded.startIndex + 1)...])
            sliced.update(data: [UInt8]())
            #expect(sliced.finalize() == theirs, "Data slice, length \(length), seed \(seed)")
            if length <= 300 {
                var lazy = SHA256Hasher()
                lazy.update(data: bytes.lazy.map { $0 })
                #expect(lazy.finalize() == theirs, "lazy collection, length \(length), seed \(seed)")
            }
        }
    }

    @Test("the CPU's SHA instructions, where this machine has them, and the portable Swift rounds give the same digests")
    func hardwareMatchesPortable() {
        let seed = UInt64.random(in: 0 ... .max)
        var random = SeededGenerator(seed: seed)
        let hardware = SHA256Hasher.usesHardware
        defer { SHA256Hasher.usesHardware = hardware }
        #if os(Linux) && arch(x86_64)
        // Where the CPU says it has the instructions, they are used.
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        #expect(hardware == cpu.split(separator: "\n").contains { $0.hasPrefix("flags") && $0.split(separator: " ").contains("sha_ni") })
        #endif
        for length in [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 4096 + 13, 1 << 20] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0 ... 255, using: &random) }
            SHA256Hasher.usesHardware = false
            let portable = SHA256Hasher.hash(data: bytes)
            SHA256Hasher.usesHardware = hardware
            #expect(SHA256Hasher.hash(data: bytes) == portable, "length \(length), seed \(seed), hardware \(hardware)")
            #expect(portable == Array(Crypto.SHA256.hash(data: bytes)), "length \(length), seed \(seed)")
        }
    }
}
