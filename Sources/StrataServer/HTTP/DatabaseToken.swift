import StrataProtocol

/// The opaque token of the database changes (`GET /v1/database/changes`): the life of the
/// database clock it belongs to, the counter's value the caller has seen through, and whether it
/// continues a reset (a full listing that spans pages).
///
/// Text form: `d1.<life, 16 hex digits>.<sealed stamp, 16 hex digits>.<0 or 1>.<check, 8 hex
/// digits>`. The stamp is sealed with the clock's key (``DatabaseClock/key``, a keyed permutation
/// of 64-bit values), so that a token does not tell a user how many changes the whole server saw
/// between two of their requests. The check is a 32-bit FNV-1a hash of what precedes it, so that a
/// token damaged or edited by hand is refused (`400 badRequest`) rather than read as another
/// position (one edited with its check recomputed unseals to an arbitrary stamp: at worst a reset
/// of the editor's own listing).
struct DatabaseToken: Sendable, Hashable {
    var life: UInt64
    /// The stamp as the text carries it (``stamp(key:)`` unseals it).
    var sealed: UInt64
    /// The token of a page of a reset that has more pages: the next page is still a reset's.
    var resetting: Bool

    /// A token of `stamp`, sealed with `key`.
    init(life: UInt64, stamp: UInt64, resetting: Bool, key: UInt64) {
        self.life = life
        self.sealed = Self.seal(stamp, key: key)
        self.resetting = resetting
    }

    /// The stamp the token carries, unsealed with the clock's `key`.
    func stamp(key: UInt64) -> UInt64 { Self.unseal(sealed, key: key) }

    var text: String {
        let body = "d1.\(Self.hex(life, 16)).\(Self.hex(sealed, 16)).\(resetting ? 1 : 0)"
        return "\(body).\(Self.hex(UInt64(Self.check(body.utf8)), 8))"
    }

    /// Parses a token; `nil` when it is not one this server hands out.
    init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count == 47, parts.count == 5, parts[0] == "d1",
              parts[1].utf8.count == 16, parts[2].utf8.count == 16, parts[4].utf8.count == 8,
              parts[1].utf8.allSatisfy(Self.isHexDigit), parts[2].utf8.allSatisfy(Self.isHexDigit), parts[4].utf8.allSatisfy(Self.isHexDigit),
              let life = UInt64(parts[1], radix: 16), let sealed = UInt64(parts[2], radix: 16),
              parts[3] == "0" || parts[3] == "1",
              let check = UInt32(parts[4], radix: 16) else { return nil }
        guard Self.check(text.utf8.prefix(38)) == check else { return nil }
        self.life = life
        self.sealed = sealed
        self.resetting = parts[3] == "1"
    }

    // MARK: Sealing

    /// A four-round Feistel network over the two 32-bit halves, its round function a 64-bit mix of
    /// the key, the round and the half: a permutation of 64-bit values for every key.
    static func seal(_ value: UInt64, key: UInt64) -> UInt64 {
        var left = UInt32(truncatingIfNeeded: value >> 32), right = UInt32(truncatingIfNeeded: value)
        for round in 0..<4 {
            (left, right) = (right, left ^ Self.round(right, round, key))
        }
        return UInt64(left) << 32 | UInt64(right)
    }

    static func unseal(_ value: UInt64, key: UInt64) -> UInt64 {
        var left = UInt32(truncatingIfNeeded: value >> 32), right = UInt32(truncatingIfNeeded: value)
        for round in (0..<4).reversed() {
            (left, right) = (right ^ Self.round(left, round, key), left)
        }
        return UInt64(left) << 32 | UInt64(right)
    }

    /// SplitMix64's finalizer over the key, the round and the half.
    private static func round(_ half: UInt32, _ round: Int, _ key: UInt64) -> UInt32 {
        var z = key &+ UInt64(half) &+ UInt64(round + 1) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return UInt32(truncatingIfNeeded: z ^ (z >> 31))
    }

    // MARK: Text

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }

    private static func hex(_ value: UInt64, _ digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    private static func check(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }
}
