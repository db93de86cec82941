import StrataLog

/// A log entry that records a state the store adopted from elsewhere: a zone's snapshot (its
/// change token had expired, or the zone was healed and its generation raised) merged into the
/// store's own state.
///
/// A store's state must be explainable by its log: without this entry, a store that adopted a
/// snapshot holds objects that no event of its log names, and every reader of history (the
/// store's own replay, `strata verify`, `replay`, blame, `diff`) would take the log for the whole
/// history and misread the store. With it, a replay reaching the entry merges the adopted state
/// (the same join `Store.adoptSnapshot(_:origin:)` did), so replaying the log gives exactly
/// the states the store had: its own before the adoption, the merged one after.
///
/// The adopted payload itself (a projection snapshot, possibly large) is not in the entry: it is
/// kept beside the log under its SHA-256 (see the store directory in the Strata format article),
/// and the entry names it by that hash. An entry is never pushed: it holds no events.
///
/// Layout (after the entry-kind byte ``entryFormat``): the SHA-256 of the adopted payload (32
/// bytes), its size (`varint`), the canonical digest of the adopted state (32 bytes, the digest
/// `Store.digest()` gives for it), the newest HLC it holds (`u64`), and where it came from
/// (`varint` length + UTF-8).
package struct AdoptionRecord: Sendable, Hashable {
    /// The first byte of an adoption entry. A transaction entry starts with its format version
    /// (1), so the first byte tells the two kinds apart.
    public static let entryFormat: UInt8 = 2

    /// The lower-case hex SHA-256 of the adopted payload: the name it is kept under.
    public var contentHash: String
    /// The adopted payload's size in bytes.
    public var size: UInt64
    /// The canonical digest of the adopted state (what `Store.digest()` of a store holding
    /// exactly that state gives), lower-case hex.
    public var stateDigest: String
    /// The newest HLC of any event the adopted state holds.
    public var newestHLC: HLC
    /// What was adopted, for people (`zone alice/notes snapshot at position 42`, say).
    public var origin: String

    package init(contentHash: String, size: UInt64, stateDigest: String, newestHLC: HLC, origin: String) {
        self.contentHash = contentHash
        self.size = size
        self.stateDigest = stateDigest
        self.newestHLC = newestHLC
        // It may carry text a server chose (a token): no control characters reach a terminal.
        self.origin = String(String.UnicodeScalarView(origin.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : $0 }))
    }

    /// Whether a log entry is an adoption record (else it is a transaction, or damaged).
    public static func isAdoption(_ entry: [UInt8]) -> Bool {
        entry.first == entryFormat
    }

    /// The entry's bytes.
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 96 + origin.utf8.count)
        w.u8(Self.entryFormat)
        w.raw(Self.bytes(ofHex: contentHash))
        w.varint(size)
        w.raw(Self.bytes(ofHex: stateDigest))
        w.u64(newestHLC.rawValue)
        w.lengthPrefixed(Array(origin.utf8))
        return w.bytes
    }

    /// Reads an adoption entry.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` naming the position when the bytes are not an
    ///   adoption entry, are truncated, have trailing bytes or an origin that is not UTF-8.
    public init(decoding bytes: [UInt8], position: UInt64? = nil) throws {
        let parsed: AdoptionRecord? = bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            guard r.u8() == Self.entryFormat, let hash = r.bytes(32), let size = r.varint(), let digest = r.bytes(32),
                  let hlc = r.u64(), let origin = r.lengthPrefixed(), r.remaining == 0,
                  let text = String(validating: origin, as: UTF8.self)
            else { return nil }
            return AdoptionRecord(contentHash: Self.hex(hash), size: size, stateDigest: Self.hex(digest), newestHLC: HLC(rawValue: hlc), origin: text)
        }
        guard let parsed else { throw StoreError(.corruptEvent, "a truncated or malformed adoption record", position: position) }
        self = parsed
    }

    /// The lower-case hex SHA-256 of `bytes`.
    public static func contentHash(of bytes: [UInt8]) -> String {
        hex(SHA256Hasher.hash(data: bytes))
    }

    package static func hex(_ bytes: some Sequence<UInt8>) -> String { Hex.encode(bytes) }

    /// 32 bytes from 64 hex digits (zeros for anything else: the hashes here are always made by
    /// ``hex(_:)``).
    package static func bytes(ofHex text: String) -> [UInt8] {
        guard let bytes = Hex.decode(text), bytes.count == 32 else { return [UInt8](repeating: 0, count: 32) }
        return bytes
    }
}
