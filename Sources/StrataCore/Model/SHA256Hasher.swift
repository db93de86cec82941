// SHA-256 (FIPS 180-4): the store's digests, the adoption record's content hash and the identity
// file's checksum need nothing more. On Apple platforms CryptoKit's (no dependency, hardware
// speed); elsewhere Strata's own, so that an app on Linux builds no copy of BoringSSL
// (swift-crypto's: about half of an app's build steps). Ours is checked against the standard's
// test vectors and against swift-crypto on random inputs in random pieces (SHA256Tests); it
// hashes about 100 MB/s in a release build.
#if canImport(CryptoKit)
import CryptoKit

/// An incremental SHA-256: `update` with bytes in any pieces, then `finalize` (once).
package struct SHA256Hasher: Sendable {
    private var hasher = CryptoKit.SHA256()
    /// As on Linux, where it chooses the CPU's SHA instructions; CryptoKit chooses for itself, so
    /// here it only keeps the callers (the fingerprints, the tests) one code on every platform.
    package nonisolated(unsafe) static var usesHardware = false

    package init() {}

    /// The digest of `bytes` (32 bytes).
    package static func hash<Bytes: Collection<UInt8>>(data bytes: Bytes) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(data: bytes)
        return hasher.finalize()
    }

    package mutating func update<Bytes: Collection<UInt8>>(data bytes: Bytes) {
        if let done: Void = bytes.withContiguousStorageIfAvailable({ hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }) {
            return done
        }
        hasher.update(data: Array(bytes))
    }

    package mutating func finalize() -> [UInt8] { Array(hasher.finalize()) }

    /// The first 16 bytes of the digest of `bytes` as two big-endian words, in one call.
    package static func prefix128(of bytes: UnsafeRawBufferPointer, hardware: Bool = true) -> (high: UInt64, low: UInt64) {
        var hasher = SHA256Hasher()
        hasher.hasher.update(bufferPointer: bytes)
        return hasher.finalizePrefix128()
    }

    /// The digest's first 16 bytes as two big-endian words. The hasher is spent.
    package mutating func finalizePrefix128() -> (high: UInt64, low: UInt64) {
        hasher.finalize().withUnsafeBytes { digest in
            var high: UInt64 = 0
            var low: UInt64 = 0
            for i in 0..<8 {
                high = high << 8 | UInt64(digest[i])
                low = low << 8 | UInt64(digest[8 + i])
            }
            return (high, low)
        }
    }
}
#else
import CSHA256

/// An incremental SHA-256: `update` with bytes in any pieces, then `finalize` (once).
///
/// It allocates nothing: the state and the unfinished block are fixed-size fields. A diff
/// fingerprints every event of two stores (two million hashes of about 60 bytes), and an array
/// per hash was a third of that.
package struct SHA256Hasher: Sendable {
    /// Whether whole blocks go through the CPU's SHA instructions (x86-64 with the SHA
    /// extensions); tests turn it off to check the portable path gives the same digests.
    package nonisolated(unsafe) static var usesHardware = strata_sha256_hardware_available() == 1

    private typealias Words = (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)
    private var state: Words =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)
    /// An unfinished 64-byte block: its first `pendingCount` bytes.
    private var pending: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var pendingCount = 0
    private var length: UInt64 = 0

    package init() {}

    /// The digest of `bytes` (32 bytes).
    package static func hash<Bytes: Collection<UInt8>>(data bytes: Bytes) -> [UInt8] {
        var hasher = SHA256Hasher()
        hasher.update(data: bytes)
        return hasher.finalize()
    }

    package mutating func update<Bytes: Collection<UInt8>>(data bytes: Bytes) {
        length &+= UInt64(bytes.count)
        if let done = bytes.withContiguousStorageIfAvailable({ absorb(UnsafeRawBufferPointer($0)) }) { return done }
        let copy = Array(bytes)
        copy.withUnsafeBytes { absorb($0) }
    }

    /// The first 16 bytes of the digest of `bytes` as two big-endian words, in one call: the
    /// whole blocks straight from `bytes`, the rest and the padding in one or two blocks on the
    /// stack (the event fingerprints hash two million short encodings in a diff; the pending
    /// block of `update` and `finalize` was a tenth of that). `hardware`: the value of
    /// ``usesHardware``, read once by a caller hashing many (a global's every read is checked
    /// for exclusive access).
    package static func prefix128(of bytes: UnsafeRawBufferPointer, hardware: Bool = usesHardware) -> (high: UInt64, low: UInt64) {
        var hasher = SHA256Hasher()
        let whole = bytes.count / 64
        if whole > 0, let base = bytes.baseAddress { hasher.compressBlocks(base, count: whole, hardware: hardware) }
        let rest = bytes.count - 64 * whole
        var tail: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                   UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &tail) { block in
            guard let start = block.baseAddress else { return }
            if rest > 0, let base = bytes.baseAddress { start.copyMemory(from: base + 64 * whole, byteCount: rest) }
            block[rest] = 0x80
            let blocks = rest < 56 ? 1 : 2
            block.storeBytes(of: (UInt64(bytes.count) &* 8).bigEndian, toByteOffset: 64 * blocks - 8, as: UInt64.self)
            hasher.compressBlocks(start, count: blocks, hardware: hardware)
        }
        return (UInt64(hasher.state.0) << 32 | UInt64(hasher.state.1), UInt64(hasher.state.2) << 32 | UInt64(hasher.state.3))
    }

    /// The digest of everything given (32 bytes). The hasher is spent.
    package mutating func finalize() -> [UInt8] {
        pad()
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7] {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    /// The digest's first 16 bytes as two big-endian words, without an array. The hasher is spent.
    package mutating func finalizePrefix128() -> (high: UInt64, low: UInt64) {
        pad()
        return (UInt64(state.0) << 32 | UInt64(state.1), UInt64(state.2) << 32 | UInt64(state.3))
    }

    /// The standard's padding: 0x80, zeros to 56 mod 64, the length in bits (big-endian).
    private mutating func pad() {
        let bits = length &* 8
        let zeros = pendingCount < 56 ? 55 - pendingCount : 119 - pendingCount
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 72) { tail in
            tail.initialize(repeating: 0)
            tail[0] = 0x80
            for j in 0..<8 { tail[1 + zeros + j] = UInt8(truncatingIfNeeded: bits >> UInt64(56 - 8 * j)) }
            absorb(UnsafeRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(tail)[0..<(9 + zeros)]))
        }
    }

    private mutating func absorb(_ input: UnsafeRawBufferPointer) {
        guard let base = input.baseAddress else { return }
        var offset = 0
        if pendingCount > 0 {
            let take = min(64 - pendingCount, input.count)
            let at = pendingCount
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.advanced(by: at).copyMemory(from: base, byteCount: take)
            }
            pendingCount += take
            offset = take
            guard pendingCount == 64 else { return }
            var block = pending
            withUnsafeBytes(of: &block) { compressBlocks($0.baseAddress!, count: 1) }
            pendingCount = 0
        }
        let whole = (input.count - offset) / 64
        if whole > 0 {
            compressBlocks(base + offset, count: whole)
            offset += 64 * whole
        }
        let rest = input.count - offset
        if rest > 0 {
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.copyMemory(from: base + offset, byteCount: rest)
            }
            pendingCount = rest
        }
    }

    /// `count` 64-byte blocks into the state, by the CPU's instructions when it has them.
    private mutating func compressBlocks(_ data: UnsafeRawPointer, count: Int, hardware: Bool = usesHardware) {
        if hardware {
            withUnsafeMutablePointer(to: &state) { words in
                words.withMemoryRebound(to: UInt32.self, capacity: 8) { strata_sha256_hardware_blocks($0, data, count) }
            }
            return
        }
        for i in 0..<count { compress(data.advanced(by: 64 * i).assumingMemoryBound(to: UInt8.self)) }
    }

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// One 64-byte block into the state (the standard's compression function).
    private mutating func compress(_ block: UnsafePointer<UInt8>) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for i in 0..<16 {
                w[i] = UInt32(block[4 * i]) << 24 | UInt32(block[4 * i + 1]) << 16 | UInt32(block[4 * i + 2]) << 8 | UInt32(block[4 * i + 3])
            }
            for i in 16..<64 {
                let s0 = w[i - 15].rotatedRight(7) ^ w[i - 15].rotatedRight(18) ^ (w[i - 15] >> 3)
                let s1 = w[i - 2].rotatedRight(17) ^ w[i - 2].rotatedRight(19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, h) = state
            Self.k.withUnsafeBufferPointer { k in
                for i in 0..<64 {
                    let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                    let choose = (e & f) ^ (~e & g)
                    let t1 = h &+ s1 &+ choose &+ k[i] &+ w[i]
                    let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = s0 &+ majority
                    h = g; g = f; f = e; e = d &+ t1
                    d = c; c = b; b = a; a = t1 &+ t2
                }
            }
            state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
        }
    }
}

extension UInt32 {
    @inline(__always) fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self >> count) | (self << (32 - count)) }
}
#endif
