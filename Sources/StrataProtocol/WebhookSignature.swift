public import Foundation
import StrataCore

/// The signature of a webhook notification (the server's `webhook.url`): the `Strata-Signature`
/// header, `t=<unix seconds>,v1=<hex HMAC-SHA256>`, where the HMAC, keyed with the secret, is of
/// the seconds, a `.`, and the request body's bytes as received (before any JSON parsing). The key
/// is the secret's bytes as configured — for `strata serve --webhook-secret-file`, the file's text
/// (UTF-8, surrounding whitespace trimmed), not anything it might decode to. The time is signed with
/// the body so that a notification captured on the way cannot be replayed later: a receiver refuses
/// one whose time is far from its clock (``verify(body:header:secret:now:tolerance:)``, five
/// minutes by default). Each attempt of a delivery is signed anew; the `Strata-Webhook-Id` header
/// stays the same across attempts, so that a receiver can drop a repeat.
///
/// In this module (not the server's) so that an app's backend written in Swift verifies with
/// nothing more than `StrataProtocol`.
public enum WebhookSignature {
    /// The header's name.
    public static let header = "Strata-Signature"
    /// The header naming a notification (the same across its delivery attempts).
    public static let idHeader = "Strata-Webhook-Id"

    /// The header's value for `body` sent at `seconds` (since 1970).
    public static func sign(body: [UInt8], secret: [UInt8], seconds: Int64) -> String {
        "t=\(seconds),v1=\(Hex.encode(mac(body: body, secret: secret, seconds: seconds)))"
    }

    /// Why a notification's signature was refused.
    public enum Refusal: Error, Sendable, Hashable {
        /// The header is missing or not of the form `t=…,v1=…`.
        case malformed
        /// The signed time is further from the receiver's clock than the tolerance: `age` is the
        /// receiver's time minus the signed time, in whole seconds (negative: from the future).
        case stale(age: Int64)
        /// No `v1` signature in the header matches the body and the secret.
        case mismatch
    }

    /// Checks a received notification: the header's time within `tolerance` of `now`, and a `v1`
    /// signature (any of them: a header may carry several while a secret is rotated) that matches
    /// `body` under `secret`, compared in constant time.
    public static func verify(body: [UInt8], header: String?, secret: [UInt8], now: Date = Date(),
                              tolerance: TimeInterval = 300) throws(Refusal) {
        guard let header, header.utf8.count <= 4096 else { throw .malformed }
        var seconds: Int64?
        var signatures: [[UInt8]] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { throw .malformed }
            switch pair[0] {
            case "t":
                guard let value = Int64(pair[1]) else { throw .malformed }
                seconds = value
            case "v1":
                guard let bytes = Hex.decode(pair[1].lowercased()), bytes.count == 32 else { throw .malformed }
                signatures.append(bytes)
            default:
                continue
            }
        }
        guard let seconds, !signatures.isEmpty else { throw .malformed }
        // In whole seconds, saturating: a signed time of any Int64 is refused, never trapped on.
        let nowSeconds = Int64(exactly: now.timeIntervalSince1970.rounded(.down)) ?? 0
        let (age, overflow) = nowSeconds.subtractingReportingOverflow(seconds)
        guard !overflow, Double(age.magnitude) <= tolerance else { throw .stale(age: overflow ? (seconds > 0 ? .min : .max) : age) }
        let expected = mac(body: body, secret: secret, seconds: seconds)
        var matched = false
        for signature in signatures {
            var difference: UInt8 = 0
            for index in expected.indices { difference |= signature[index] ^ expected[index] }
            if difference == 0 { matched = true }
        }
        guard matched else { throw .mismatch }
    }

    /// HMAC-SHA256 (RFC 2104) of `"<seconds>." + body` keyed with `secret`.
    static func mac(body: [UInt8], secret: [UInt8], seconds: Int64) -> [UInt8] {
        let blockSize = 64
        var key = secret.count > blockSize ? SHA256Hasher.hash(data: secret) : secret
        key += [UInt8](repeating: 0, count: blockSize - key.count)
        var inner = SHA256Hasher()
        inner.update(data: key.map { $0 ^ 0x36 })
        inner.update(data: Array("\(seconds).".utf8))
        inner.update(data: body)
        var outer = SHA256Hasher()
        outer.update(data: key.map { $0 ^ 0x5c })
        outer.update(data: inner.finalize())
        return outer.finalize()
    }
}

/// What a webhook notification's body holds (JSON): which zones changed and, for each, the users
/// whose devices the receiver wakes.
public struct WebhookNotification: Sendable, Hashable, Codable {
    /// One zone that changed.
    public struct ZoneChange: Sendable, Hashable, Codable {
        public var zone: String
        public var owner: String
        /// The users to wake, as the server names them (a static token's user, or a JWT issuer's
        /// namespaced subject): the owner and every user with a grant who may read the zone as it
        /// is when the notification goes, and those who lost it in the burst (a grant revoked, a
        /// share left, the zone deleted) so that their devices drop it. At most
        /// 1,000; `moreUsers` says some were left out (their devices find the change at their next sync).
        public var users: [String]
        public var moreUsers: Bool?
        /// Whether the zone was deleted (its users' devices drop it).
        public var deleted: Bool?

        public init(zone: String, owner: String, users: [String], moreUsers: Bool? = nil, deleted: Bool? = nil) {
            self.zone = zone
            self.owner = owner
            self.users = users
            self.moreUsers = moreUsers
            self.deleted = deleted
        }
    }

    /// The notification's ID, as in the `Strata-Webhook-Id` header (the same on every attempt).
    public var id: String
    /// When the server first sent it (milliseconds since 1970, the server's clock; the signature's
    /// `t` is in seconds).
    public var sentAt: Int64
    public var changes: [ZoneChange]

    public init(id: String, sentAt: Int64, changes: [ZoneChange]) {
        self.id = id
        self.sentAt = sentAt
        self.changes = changes
    }
}
