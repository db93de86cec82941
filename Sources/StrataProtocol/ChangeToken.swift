/// A change token: where a client stands in a zone's log.
///
/// Opaque to clients: the base64url encoding (no padding) of one of
/// - version 1, 17 bytes: the version `u8` = 1, the zone's epoch `u64` little-endian and the log
///   position `u64` little-endian (the number of transactions before this point);
/// - version 2, 25 bytes: version 2, the epoch, the position, then the zone's generation `u64`
///   little-endian (the ID of the newest device state merged into it, see `ZoneInfo.merges` in StrataServer);
/// - version 3, 33 bytes: version 3, the epoch, the position, the generation, then a
///   *fingerprint* `u64` little-endian: 64 bits of the digest of the transaction before the
///   position (`ZoneStorage.lastTransactionFingerprint(zone:at:)` in StrataServer). Read, no longer written.
/// - version 4, 33 bytes: as version 3, but the fingerprint is of the whole history before the
///   position: a running hash over every transaction's digest (see
///   `ZoneStorage.fingerprint(zone:at:)` in StrataServer). Version 3 looked at one transaction, and a server
///   restored from a backup whose devices re-pushed in the order they first pushed can hold the
///   same transaction there after a different history.
///
/// The shortest layout that holds the fields is written: version 1 for generation 0 and no
/// fingerprint (position 0), version 2 for a later generation without a fingerprint, else
/// version 4. A token without a fingerprint is of fingerprint 0: not checked.
///
/// Tokens are monotonic within an epoch and a generation.
///
/// ```swift
/// let token = ChangeToken(epoch: zone.epoch, position: 42)
/// let text = token.description          // 23 characters
/// let back = try ChangeToken(parsing: text)
/// try back.validate(epoch: zone.epoch, start: 0, end: 100)
/// ```
public struct ChangeToken: Sendable, Hashable, CustomStringConvertible {
    /// The version byte of tokens of generation 0 without a fingerprint.
    public static let version: UInt8 = 1
    /// Bytes of an encoded version 1 token.
    public static let byteCount = 17
    /// The version byte of tokens of a later generation without a fingerprint, and their size.
    public static let generationVersion: UInt8 = 2
    public static let generationByteCount = 25
    /// The version byte of tokens with the fingerprint of the transaction before their position
    /// (read, no longer written), and their size.
    public static let fingerprintVersion: UInt8 = 3
    public static let fingerprintByteCount = 33
    /// The version byte of tokens with the fingerprint of the whole history before their
    /// position (33 bytes, as version 3).
    public static let historyVersion: UInt8 = 4

    public var epoch: UInt64
    public var position: UInt64
    public var generation: UInt64
    /// A fingerprint of the history before ``position`` (of the whole history when
    /// ``fingerprintsHistory``, else of the transaction before it); 0 when not known.
    public var fingerprint: UInt64
    /// Whether ``fingerprint`` is of the whole history (version 4) or of the transaction before
    /// ``position`` only (version 3, handed out by earlier servers).
    public var fingerprintsHistory: Bool

    public init(epoch: UInt64, position: UInt64, generation: UInt64 = 0, fingerprint: UInt64 = 0, fingerprintsHistory: Bool = true) {
        self.epoch = epoch
        self.position = position
        self.generation = generation
        self.fingerprint = fingerprint
        self.fingerprintsHistory = fingerprintsHistory
    }

    /// The token's bytes (17, 25 or 33, see the type's discussion).
    public var bytes: [UInt8] {
        var fields = [epoch, position]
        let version: UInt8
        if fingerprint != 0 {
            version = fingerprintsHistory ? ChangeToken.historyVersion : ChangeToken.fingerprintVersion
            fields += [generation, fingerprint]
        } else if generation != 0 {
            version = ChangeToken.generationVersion
            fields.append(generation)
        } else {
            version = ChangeToken.version
        }
        var bytes = [version]
        bytes.reserveCapacity(1 + 8 * fields.count)
        for field in fields {
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: field >> UInt64(shift))) }
        }
        return bytes
    }

    /// The token as clients see it: base64url without padding.
    public var description: String { Base64URL.encode(bytes) }

    /// Parses a token.
    ///
    /// - Throws: ``ChangeTokenError/Code/malformed`` when `text` is not base64url of a token's
    ///   bytes or names an unknown version.
    public init(parsing text: String) throws(ChangeTokenError) {
        guard let bytes = Base64URL.decode(text) else {
            throw ChangeTokenError(.malformed, "change token \"\(text.prefix(64))\" is not base64url without padding")
        }
        guard let version = bytes.first else {
            throw ChangeTokenError(.malformed, "change token \"\(text.prefix(64))\" is empty")
        }
        let expected: Int
        switch version {
        case ChangeToken.version: expected = ChangeToken.byteCount
        case ChangeToken.generationVersion: expected = ChangeToken.generationByteCount
        case ChangeToken.fingerprintVersion, ChangeToken.historyVersion: expected = ChangeToken.fingerprintByteCount
        default:
            throw ChangeTokenError(.malformed, "change token \"\(text.prefix(64))\" has version \(version); this server knows 1 to 4")
        }
        guard bytes.count == expected else {
            throw ChangeTokenError(.malformed, "change token \"\(text.prefix(64))\" holds \(bytes.count) bytes, not \(expected)")
        }
        func field(_ index: Int) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<8 { value |= UInt64(bytes[1 + 8 * index + i]) << UInt64(8 * i) }
            return value
        }
        let fingerprinted = version == ChangeToken.fingerprintVersion || version == ChangeToken.historyVersion
        self.init(epoch: field(0), position: field(1),
                  generation: version == ChangeToken.version ? 0 : field(2),
                  fingerprint: fingerprinted ? field(3) : 0,
                  fingerprintsHistory: version != ChangeToken.fingerprintVersion)
    }

    /// Checks the token against a zone whose epoch is `epoch`, whose merged states are `merges`
    /// (oldest first), and whose log holds `start..<end`.
    ///
    /// - Throws: ``ChangeTokenError/Code/zoneReset`` when the epochs differ,
    ///   ``ChangeTokenError/Code/expired`` when the position is before `start` or the token is of
    ///   an earlier merge, or of none (handed out before a state was merged into the zone),
    ///   ``ChangeTokenError/Code/beyondEnd`` when it is after `end` or of a merge the zone does not
    ///   know (the server lost what the client saw).
    public func validate(epoch zoneEpoch: UInt64, merges: [UInt64] = [], start: UInt64, end: UInt64) throws(ChangeTokenError) {
        guard epoch == zoneEpoch else {
            throw ChangeTokenError(.zoneReset, "change token \(self) is of an earlier incarnation of the zone (it was deleted and recreated)")
        }
        let newest = merges.last ?? 0
        if generation != newest {
            guard generation == 0 || merges.contains(generation) else {
                throw ChangeTokenError(.beyondEnd, "change token \(self) is of a merged state the zone does not hold: the server lost a state merged into it")
            }
            throw ChangeTokenError(.expired, "change token \(self) was handed out before a device's state was merged into the zone: adopt the zone's snapshot")
        }
        guard position >= start else {
            throw ChangeTokenError(.expired, "change token \(self) points at position \(position); the zone's history starts at \(start)")
        }
        guard position <= end else {
            throw ChangeTokenError(.beyondEnd, "change token \(self) points at position \(position), past the zone's end (\(end))")
        }
    }

    /// Checks the token's fingerprint against the zone's (`nil`: not known there, not checked; a
    /// token without one is not checked either): of the whole history before the position for a
    /// version 4 token, of the transaction before it for version 3 (``fingerprintsHistory``).
    ///
    /// - Throws: ``ChangeTokenError/Code/beyondEnd`` when they differ: the zone's history before
    ///   the token is not the one the client saw (the server was restored from an older copy and
    ///   has grown past the token since).
    public func validate(fingerprint actual: UInt64?) throws(ChangeTokenError) {
        guard fingerprint != 0, let actual, actual != fingerprint else { return }
        throw ChangeTokenError(.beyondEnd, "change token \(self): the zone's history before position \(position) is not the one this client saw (the server was restored from an older copy and has grown since)")
    }
}

/// Why a change token was refused.
public struct ChangeTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, extensible classification.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Not a token at all (answered `400 badRequest`).
        public static let malformed = Code("malformed")
        /// Of another epoch of the zone (answered `410 zoneReset`).
        public static let zoneReset = Code("zoneReset")
        /// Before the history the server still holds (answered `410 tokenExpired`).
        public static let expired = Code("expired")
        /// After the zone's end: the server holds less than the client has seen — restored from
        /// a backup, or a lost disk (answered `410 zoneRewound`).
        public static let beyondEnd = Code("beyondEnd")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// base64url (RFC 4648 §5) without padding, strict: any other character, padding, or a
/// non-canonical final character makes decoding fail.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 != 1 else { return nil }
        var values: [UInt32] = []
        values.reserveCapacity(chars.count)
        for c in chars {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(UInt32(c - UInt8(ascii: "A")))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(UInt32(c - UInt8(ascii: "a") + 26))
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(UInt32(c - UInt8(ascii: "0") + 52))
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 4 <= values.count {
            let n = values[i] << 18 | values[i + 1] << 12 | values[i + 2] << 6 | values[i + 3]
            out.append(UInt8(n >> 16 & 0xFF))
            out.append(UInt8(n >> 8 & 0xFF))
            out.append(UInt8(n & 0xFF))
            i += 4
        }
        let rest = values.count - i
        if rest == 2 {
            guard values[i + 1] & 0x0F == 0 else { return nil }
            out.append(UInt8((values[i] << 2 | values[i + 1] >> 4) & 0xFF))
        } else if rest == 3 {
            guard values[i + 2] & 0x03 == 0 else { return nil }
            let n = values[i] << 18 | values[i + 1] << 12 | values[i + 2] << 6
            out.append(UInt8(n >> 16 & 0xFF))
            out.append(UInt8(n >> 8 & 0xFF))
        }
        return out
    }
}
