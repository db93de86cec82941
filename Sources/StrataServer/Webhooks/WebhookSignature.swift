import Crypto
public import Foundation

/// The signature of a webhook notification: the `Strata-Signature` header,
/// `t=<unix seconds>,v1=<hex HMAC-SHA256>`, where the HMAC, keyed with the configured secret, is of
/// the seconds, a `.`, and the request body's bytes. The time is signed with the body so that a
/// notification captured on the way cannot be replayed later: a receiver refuses one whose time is
/// far from its clock (``verify(body:header:secret:now:tolerance:)``, five minutes by default).
/// Each attempt of a delivery is signed anew; the `Strata-Webhook-Id` header stays the same across
/// attempts, so that a receiver can drop a repeat.
public enum WebhookSignature {
    /// The header's name.
    public static let header = "Strata-Signature"
    /// The header naming a notification (the same across its delivery attempts).
    public static let idHeader = "Strata-Webhook-Id"

    /// The header's value for `body` sent at `seconds` (since 1970).
    public static func sign(body: [UInt8], secret: [UInt8], seconds: Int64) -> String {
        "t=\(seconds),v1=\(mac(body: body, secret: secret, seconds: seconds))"
    }

    /// Why a notification's signature was refused.
    public enum Refusal: Error, Sendable, Hashable {
        /// The header is missing or not of the form `t=…,v1=…`.
        case malformed
        /// The signed time is further from the receiver's clock than the tolerance.
        case stale(seconds: Int64)
        /// No `v1` signature in the header matches the body and the secret.
        case mismatch
    }

    /// Checks a received notification: the header's time within `tolerance` of `now`, and a `v1`
    /// signature (any of them: a header may carry several while a secret is rotated) that matches
    /// `body` under `secret`, compared in constant time.
    public static func verify(body: [UInt8], header: String?, secret: [UInt8], now: Date = Date(),
                              tolerance: TimeInterval = 300) throws(Refusal) {
        guard let header else { throw .malformed }
        var seconds: Int64?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { throw .malformed }
            switch pair[0] {
            case "t": seconds = Int64(pair[1])
            case "v1": signatures.append(pair[1].lowercased())
            default: continue
            }
        }
        guard let seconds, !signatures.isEmpty else { throw .malformed }
        let age = now.timeIntervalSince1970 - Double(seconds)
        guard abs(age) <= tolerance else { throw .stale(seconds: Int64(age)) }
        let expected = Array(mac(body: body, secret: secret, seconds: seconds).utf8)
        var matched = false
        for signature in signatures {
            let given = Array(signature.utf8)
            guard given.count == expected.count else { continue }
            var difference: UInt8 = 0
            for index in given.indices { difference |= given[index] ^ expected[index] }
            if difference == 0 { matched = true }
        }
        guard matched else { throw .mismatch }
    }

    private static func mac(body: [UInt8], secret: [UInt8], seconds: Int64) -> String {
        var signed = Array("\(seconds).".utf8)
        signed.append(contentsOf: body)
        let code = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: secret))
        return code.map { String(format: "%02x", $0) }.joined()
    }
}
