import StrataProtocol

/// The opaque token of the database changes (`GET /v1/database/changes`): the life of the
/// database clock it belongs to, the counter's value the caller has seen through, and whether it
/// continues a reset (a full listing that spans pages).
///
/// Text form: `d1.<life, 16 hex digits>.<stamp, 16 hex digits>.<0 or 1>.<check, 8 hex digits>`,
/// the check a 32-bit FNV-1a hash of what precedes it, so that a token damaged or edited by hand
/// is refused (`400 badRequest`) rather than read as another position.
struct DatabaseToken: Sendable, Hashable, CustomStringConvertible {
    var life: UInt64
    var stamp: UInt64
    /// The token of a page of a reset that has more pages: the next page is still a reset's.
    var resetting: Bool

    var description: String {
        let body = "d1.\(Self.hex(life, 16)).\(Self.hex(stamp, 16)).\(resetting ? 1 : 0)"
        return "\(body).\(Self.hex(UInt64(Self.check(body)), 8))"
    }

    init(life: UInt64, stamp: UInt64, resetting: Bool) {
        self.life = life
        self.stamp = stamp
        self.resetting = resetting
    }

    /// Parses a token; `nil` when it is not one this server hands out.
    init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count == 47, parts.count == 5, parts[0] == "d1",
              parts[1].utf8.count == 16, parts[2].utf8.count == 16, parts[4].utf8.count == 8,
              parts[1].utf8.allSatisfy(Self.isHexDigit), parts[2].utf8.allSatisfy(Self.isHexDigit), parts[4].utf8.allSatisfy(Self.isHexDigit),
              let life = UInt64(parts[1], radix: 16), let stamp = UInt64(parts[2], radix: 16),
              parts[3] == "0" || parts[3] == "1",
              let check = UInt32(parts[4], radix: 16) else { return nil }
        guard Self.check(text.utf8.prefix(38)) == check else { return nil }
        self.init(life: life, stamp: stamp, resetting: parts[3] == "1")
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }

    private static func hex(_ value: UInt64, _ digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    private static func check(_ body: String) -> UInt32 { check(body.utf8) }

    private static func check(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in bytes {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }
}
