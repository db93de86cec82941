import Foundation
import StrataLog

/// Replaces every value a user wrote with a keyed hash of it, keeping the structure around it:
/// what a redacted debug bundle holds (`strata bundle --redact`).
///
/// Equal values stay equal and different ones stay different (a 64-bit keyed hash; a collision
/// is a 2^-64 chance per pair), so a diff, a replay or a blame of redacted copies finds what it
/// finds on the originals, up to the redaction. Without the key, a value cannot be confirmed by
/// guessing it: the hash is HMAC-SHA-256 under a 256-bit key that stays with whoever redacted.
/// Two bundles are comparable value by value only when made with the same key.
///
/// What is kept as it is: object IDs and references (the graph's structure), entity and
/// attribute names and the schema, replicas, sequences, clocks, timestamps, positions, users
/// (`authors.json`) and zone names (sync cursors), the sizes of assets. An adopted state's
/// origin text is replaced as a string is. What is replaced, by type:
/// - a string: `h:` and 16 hex digits;
/// - an integer: a 64-bit integer; a double: an integer-valued double below 2^53 in magnitude;
///   a date: a date within 2^50 µs (35 years) of 1970;
/// - bytes and a UUID: 16 bytes of the hash;
/// - a bool: the value XOR a key bit of its attribute's (two values cannot stay distinct any
///   other way, so whoever knows one value of an attribute can read that attribute's others);
/// - an asset: its hash, media type (`redacted/h…`) and file name; its size stays.
public struct ValueRedaction: Sendable {
    public let key: [UInt8]
    /// The HMAC's inner and outer hashes with the padded key absorbed (one block each): every
    /// value's hash starts from copies of them, so it costs two blocks instead of four and no
    /// padded key is built per value (a bundle of 1 M events hashes millions of values).
    private let innerStart: SHA256Hasher
    private let outerStart: SHA256Hasher

    /// - Throws: ``StoreError/Code/invalidArgument`` unless `key` is 32 bytes.
    public init(key: [UInt8]) throws(StoreError) {
        guard key.count == 32 else { throw StoreError(.invalidArgument, "a redaction key is 32 bytes, got \(key.count)") }
        self.key = key
        var inner = SHA256Hasher()
        inner.update(data: key.map { $0 ^ 0x36 } + [UInt8](repeating: 0x36, count: 32))
        var outer = SHA256Hasher()
        outer.update(data: key.map { $0 ^ 0x5c } + [UInt8](repeating: 0x5c, count: 32))
        innerStart = inner
        outerStart = outer
    }

    /// A fresh random key (from the system's secure generator).
    public static func newKey() -> [UInt8] {
        (0..<2).flatMap { _ -> [UInt8] in
            let id = ReplicaID.random().rawValue
            return (0..<16).map { UInt8(truncatingIfNeeded: id >> (8 * $0)) }
        }
    }

    /// Names the key without revealing it: the first 8 bytes of the SHA-256 of "strata-redaction-key"
    /// keyed by it, in hex. Bundles with the same key ID are comparable value by value.
    public var keyID: String { Hex.encode(Array(mac(tag: 0, Array("strata-redaction-key".utf8)).prefix(8))) }

    /// HMAC-SHA-256 of a type tag and the bytes (RFC 2104).
    func mac(tag: UInt8, _ bytes: [UInt8]) -> [UInt8] {
        var inner = innerStart
        inner.update(data: CollectionOfOne(tag))
        inner.update(data: bytes)
        var outer = outerStart
        outer.update(data: inner.finalize())
        return outer.finalize()
    }

    private func word(tag: UInt8, _ bytes: [UInt8]) -> UInt64 {
        mac(tag: tag, bytes).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    private func text(_ string: String, tag: UInt8 = 1) -> String {
        "h:" + Hex.encode(Array(mac(tag: tag, Array(string.utf8)).prefix(8)))
    }

    private static func bytes(of value: Int64) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

    /// The value of the attribute `field` as a redacted bundle holds it.
    public func redact(_ value: Value, field: String) -> Value {
        // A bool's bit is flipped by a key bit of its attribute's own: one known bool (a default
        // filled in by inserts) then gives away no other attribute's.
        if case .bool(let b) = value { return .bool(b != (mac(tag: 4, Array(field.utf8)).first.map { $0 & 1 == 1 } ?? false)) }
        return redact(value)
    }

    /// A value as a redacted bundle holds it (a bool: under the bit of no attribute; the bundle
    /// uses ``redact(_:field:)``).
    public func redact(_ value: Value) -> Value {
        switch value {
        case .null, .reference: return value
        case .string(let s): return .string(text(s))
        case .integer(let i): return .integer(Int64(bitPattern: word(tag: 2, Self.bytes(of: i))))
        case .double(let raw):
            let d = raw == 0 ? 0 : raw  // 0.0 and -0.0 are equal values
            return .double(Double(Int64(bitPattern: word(tag: 3, Self.bytes(of: Int64(bitPattern: d.bitPattern)))) >> 11))
        case .bool(let b): return .bool(b != (mac(tag: 4, []).first.map { $0 & 1 == 1 } ?? false))
        case .date(let t): return .date(Int64(word(tag: 5, Self.bytes(of: t)) & ((1 << 50) - 1)))
        case .bytes(let data): return .bytes(Data(mac(tag: 6, Array(data)).prefix(16)))
        case .uuid(let uuid): return .uuid(UUID(uuid: Self.uuid(mac(tag: 7, Array(ObjectID(uuid: uuid).bytes)))))
        case .asset(let asset):
            let hash = AssetHash(bytes: mac(tag: 8, asset.sha256.bytes)) ?? asset.sha256
            let media = "redacted/" + Hex.encode(Array(mac(tag: 9, Array(asset.mediaType.utf8)).prefix(6)))
            let name = asset.fileName.map { text($0, tag: 10) }
            return (try? Asset(sha256: hash, byteCount: asset.byteCount, mediaType: media, fileName: name)).map(Value.asset) ?? .null
        }
    }

    private static func uuid(_ b: [UInt8]) -> uuid_t {
        (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
    }
}

extension ValueRedaction {
    /// A transaction entry with its field values redacted (an adoption record goes through
    /// `redact(_:)` and `adoption(_:redactedPayload:digest:)`).
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the entry does not decode.
    package func redactEntry(_ bytes: [UInt8], position: UInt64?) throws -> [UInt8] {
        var transaction = try EventCodec.decode(bytes, position: position)
        for index in transaction.events.indices {
            switch transaction.events[index].change {
            case .insert(let entity, let object, let fields):
                transaction.events[index].change = .insert(entity: entity, object: object, fields: redact(fields))
            case .update(let entity, let object, let fields):
                transaction.events[index].change = .update(entity: entity, object: object, fields: redact(fields))
            case .delete, .add, .remove, .schema, .withheld:
                break
            }
        }
        return EventCodec.encode(transaction)
    }

    /// A projection snapshot payload (a log snapshot, an adopted state) with every field value
    /// redacted.
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` when it does not decode.
    package func redactState(_ payload: [UInt8]) throws -> (payload: [UInt8], digest: String) {
        let projection = Projection()
        try ProjectionCodec.decode(payload, into: projection)
        let redacted = ProjectionCodec.encode(projection) { _, record in
            var copy = record
            for index in copy.fields.indices {
                let name = projection.names.indices.contains(Int(copy.fields[index].key)) ? projection.names[Int(copy.fields[index].key)] : ""
                copy.fields[index].value = redact(copy.fields[index].value, field: name)
            }
            return copy
        }
        let check = Projection()
        try ProjectionCodec.decode(redacted, into: check)
        check.schema = check.recordedSchema
        return (redacted, check.digest())
    }

    private func redact(_ fields: [String: Value]) -> [String: Value] {
        Dictionary(uniqueKeysWithValues: fields.map { ($0.key, redact($0.value, field: $0.key)) })
    }

    /// An adoption record as a redacted bundle holds it: its origin (app and server text: a zone's
    /// and its owner's names, a token) redacted, and its hashes keyed when they are still the
    /// plain state's (its state missing on the device, so not bundled).
    package func redact(_ record: AdoptionRecord) -> AdoptionRecord {
        AdoptionRecord(contentHash: record.contentHash, size: record.size, stateDigest: record.stateDigest,
                              newestHLC: record.newestHLC, origin: text(record.origin, tag: 11))
    }

    /// The record of a state whose payload is not bundled: its hash and digest keyed too (they
    /// would confirm a guess of the plain state).
    package func redactUnbundled(_ record: AdoptionRecord) -> AdoptionRecord {
        func keyed(_ hex: String, tag: UInt8) -> String { Hex.encode(mac(tag: tag, Array(hex.utf8))) }
        return AdoptionRecord(contentHash: keyed(record.contentHash, tag: 12), size: record.size, stateDigest: keyed(record.stateDigest, tag: 13),
                              newestHLC: record.newestHLC, origin: text(record.origin, tag: 11))
    }

    /// The adoption record for a redacted state: its hash, size and digest are the redacted
    /// payload's.
    package static func adoption(_ record: AdoptionRecord, redactedPayload: [UInt8], digest: String) -> AdoptionRecord {
        AdoptionRecord(contentHash: Hex.encode(SHA256Hasher.hash(data: redactedPayload)), size: UInt64(redactedPayload.count),
                       stateDigest: digest, newestHLC: record.newestHLC, origin: record.origin)
    }
}
