import Foundation
package import StrataLog

/// A file attached to an object — a photo, a video, a document — by reference.
///
/// An asset attribute's value names the file by the SHA-256 of its bytes, with its size, media
/// type and (optionally) a file name. Events carry only this reference (a few dozen bytes); the
/// bytes live in the store's asset directory, outside the event log, and travel to the server
/// and to other devices apart from the events — a device downloads an asset only when the app
/// asks for it. Two references with the same hash name the same bytes, wherever they are used:
/// an asset is stored once however many objects, zones or versions of an object name it.
///
/// Create one from a file or from bytes with the store (`Store.importAsset(...)`), which keeps
/// the bytes; a reference made by hand names bytes the store may not have.
public struct Asset: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The SHA-256 of the asset's bytes.
    public let sha256: AssetHash
    /// The asset's size in bytes.
    public let byteCount: UInt64
    /// The media (MIME) type, `type/subtype` (e.g. `image/jpeg`).
    public let mediaType: String
    /// A file name for display or export; never used as a path. `nil` when none.
    public let fileName: String?

    /// The largest asset a reference may name: 2^40 bytes (1 TiB). A server may allow less.
    public static let maxByteCount: UInt64 = 1 << 40
    /// The longest media type and file name, in UTF-8 bytes.
    public static let maxMediaTypeBytes = 127
    public static let maxFileNameBytes = 255

    /// A reference to the bytes whose SHA-256 is `sha256`.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` for a size above ``maxByteCount``, a media
    ///   type that is not `type/subtype` in printable ASCII of at most ``maxMediaTypeBytes``, or a
    ///   file name that is empty, longer than ``maxFileNameBytes``, or holds `/` or a control
    ///   character.
    public init(sha256: AssetHash, byteCount: UInt64, mediaType: String, fileName: String? = nil) throws(StoreError) {
        if let problem = Asset.problem(byteCount: byteCount, mediaType: mediaType, fileName: fileName) {
            throw StoreError(.invalidArgument, "asset \(sha256): \(problem)")
        }
        if sha256 == Asset.emptyHash, byteCount != 0 {
            throw StoreError(.invalidArgument, "asset \(sha256) is the hash of no bytes, not of \(byteCount)")
        }
        self.sha256 = sha256
        self.byteCount = byteCount
        self.mediaType = mediaType
        self.fileName = fileName
    }

    /// What is wrong with these fields, or `nil` when they make a valid reference.
    package static func problem(byteCount: UInt64, mediaType: String, fileName: String?) -> String? {
        if byteCount > maxByteCount { return "size \(byteCount) is above the largest asset (\(maxByteCount) bytes)" }
        let type = Array(mediaType.utf8)
        let slashes = type.filter { $0 == UInt8(ascii: "/") }.count
        if type.isEmpty || type.count > maxMediaTypeBytes || slashes != 1 || type.first == UInt8(ascii: "/") || type.last == UInt8(ascii: "/")
            || type.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            return "media type \"\(mediaType)\" is not type/subtype in at most \(maxMediaTypeBytes) printable ASCII characters"
        }
        if let name = fileName {
            let bytes = Array(name.utf8)
            if bytes.isEmpty || bytes.count > maxFileNameBytes || bytes.contains(UInt8(ascii: "/")) || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return "file name \"\(name)\" is empty, longer than \(maxFileNameBytes) bytes, or holds a slash or a control character"
            }
        }
        return nil
    }

    /// The asset of no bytes (`application/octet-stream`): what a required asset attribute an
    /// older schema lacked reads as. Every store holds it without a file.
    public static let empty = Asset(unchecked: emptyHash, 0, "application/octet-stream", nil)
    static let emptyHash = AssetHash.of([UInt8]())

    public var description: String {
        "asset \(sha256) (\(byteCount) bytes, \(mediaType)\(fileName.map { ", \"\($0)\"" } ?? ""))"
    }

    enum CodingKeys: String, CodingKey { case sha256, byteCount = "size", mediaType, fileName }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let hex = try c.decode(String.self, forKey: .sha256)
        guard let hash = AssetHash(hex: hex) else {
            throw DecodingError.dataCorruptedError(forKey: .sha256, in: c, debugDescription: "not 64 lower-case hex digits")
        }
        let size = try c.decode(UInt64.self, forKey: .byteCount)
        let type = try c.decode(String.self, forKey: .mediaType)
        let name = try c.decodeIfPresent(String.self, forKey: .fileName)
        if let problem = Asset.problem(byteCount: size, mediaType: type, fileName: name) {
            throw DecodingError.dataCorruptedError(forKey: .mediaType, in: c, debugDescription: problem)
        }
        if hash == Asset.emptyHash, size != 0 {
            throw DecodingError.dataCorruptedError(forKey: .byteCount, in: c, debugDescription: "the hash of no bytes with a size of \(size)")
        }
        self.sha256 = hash
        self.byteCount = size
        self.mediaType = type
        self.fileName = name
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sha256.hex, forKey: .sha256)
        try c.encode(byteCount, forKey: .byteCount)
        try c.encode(mediaType, forKey: .mediaType)
        try c.encodeIfPresent(fileName, forKey: .fileName)
    }
}

/// A SHA-256 digest: 32 bytes, written as 64 lower-case hex digits.
public struct AssetHash: Hashable, Sendable, Comparable, CustomStringConvertible {
    // Four words rather than an array: a hash is a value every asset reference holds, and
    // comparing or hashing it should not chase a pointer.
    private let a: UInt64, b: UInt64, c: UInt64, d: UInt64

    /// The digest from its 32 bytes; `nil` for any other count.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        var words: [UInt64] = [0, 0, 0, 0]
        for (i, byte) in bytes.enumerated() { words[i / 8] = words[i / 8] << 8 | UInt64(byte) }
        (a, b, c, d) = (words[0], words[1], words[2], words[3])
    }

    /// The digest from 64 lower-case hex digits; `nil` for anything else.
    public init?(hex: String) {
        // Lower case only: a hash has one spelling, as a file or path name.
        guard hex.utf8.count == 64, !hex.utf8.contains(where: { (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }),
              let bytes = Hex.decode(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// The SHA-256 of `bytes`.
    public static func of(_ bytes: some Collection<UInt8>) -> AssetHash {
        var hasher = SHA256Hasher()
        hasher.update(data: bytes)
        return AssetHash(digest: hasher.finalize())
    }

    /// A finished hasher's 32 bytes.
    package init(digest: [UInt8]) {
        var words: [UInt64] = [0, 0, 0, 0]
        for (i, byte) in digest.prefix(32).enumerated() { words[i / 8] = words[i / 8] << 8 | UInt64(byte) }
        (a, b, c, d) = (words[0], words[1], words[2], words[3])
    }

    /// The 32 bytes.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in [a, b, c, d] {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return out
    }

    /// 64 lower-case hex digits.
    public var hex: String { Hex.encode(bytes) }

    public var description: String { hex }

    public static func < (l: AssetHash, r: AssetHash) -> Bool { (l.a, l.b, l.c, l.d) < (r.a, r.b, r.c, r.d) }
}

extension Asset {
    /// The value's encoding after its tag (see the event format article): the 32 hash bytes,
    /// the size as a `varint`, the media type and the file name as length-prefixed UTF-8 (an
    /// empty name: none).
    package func write(into w: inout ByteWriter) {
        w.raw(sha256.bytes)
        w.varint(byteCount)
        w.lengthPrefixed(Array(mediaType.utf8))
        w.lengthPrefixed(Array((fileName ?? "").utf8))
    }

    /// Reads what ``write(into:)`` wrote; a message saying what is wrong when it does not
    /// make a valid reference.
    package static func read(_ r: inout ByteReader) -> Result<Asset, AssetDecodingProblem> {
        guard let hashBytes = r.bytes(32), let hash = AssetHash(bytes: hashBytes) else { return .failure(.init("truncated asset hash")) }
        guard let size = r.varint() else { return .failure(.init("truncated asset size")) }
        guard let type = r.lengthPrefixed() else { return .failure(.init("truncated asset media type")) }
        guard let name = r.lengthPrefixed() else { return .failure(.init("truncated asset file name")) }
        let mediaType = String(decoding: type, as: UTF8.self)
        let fileName = name.isEmpty ? nil : String(decoding: name, as: UTF8.self)
        if let problem = Asset.problem(byteCount: size, mediaType: mediaType, fileName: fileName) { return .failure(.init(problem)) }
        if hash == Asset.emptyHash, size != 0 { return .failure(.init("the hash of no bytes with a size of \(size)")) }
        return .success(Asset(unchecked: hash, size, mediaType, fileName))
    }

    private init(unchecked hash: AssetHash, _ size: UInt64, _ type: String, _ name: String?) {
        sha256 = hash
        byteCount = size
        mediaType = type
        fileName = name
    }
}

/// Why an asset reference's bytes do not decode.
package struct AssetDecodingProblem: Error {
    package let message: String
    init(_ message: String) { self.message = message }
}

extension Asset {
    /// `{"sha256": "<64 hex>", "size": n, "mediaType": "…", "fileName": "…"}` (no file name: key
    /// left out), as ``Value/jsonObject`` writes it.
    public var jsonObject: [String: any Sendable] {
        var object: [String: any Sendable] = ["sha256": sha256.hex, "size": byteCount, "mediaType": mediaType]
        if let fileName { object["fileName"] = fileName }
        return object
    }

    /// A reference from its JSON object (``jsonObject``).
    ///
    /// - Throws: ``StoreError/Code/typeMismatch`` saying what is wrong.
    public init(json: Any) throws(StoreError) {
        guard let object = json as? [String: Any] else {
            throw StoreError(.typeMismatch, "expected an asset object {\"sha256\", \"size\", \"mediaType\"}, got \(json)")
        }
        guard let hex = object["sha256"] as? String, let hash = AssetHash(hex: hex) else {
            throw StoreError(.typeMismatch, "an asset's \"sha256\" must be 64 lower-case hex digits")
        }
        let size: UInt64
        if let n = object["size"] as? UInt64 { size = n }
        else if let n = object["size"] as? Int, n >= 0 { size = UInt64(n) }
        else if let n = object["size"] as? Int64, n >= 0 { size = UInt64(n) }
        else { throw StoreError(.typeMismatch, "an asset's \"size\" must be a byte count") }
        guard let type = object["mediaType"] as? String else { throw StoreError(.typeMismatch, "an asset needs a \"mediaType\"") }
        let name = object["fileName"] as? String
        if object["fileName"] != nil, !(object["fileName"] is NSNull), name == nil {
            throw StoreError(.typeMismatch, "an asset's \"fileName\" must be a string")
        }
        let unknown = Set(object.keys).subtracting(["sha256", "size", "mediaType", "fileName"])
        guard unknown.isEmpty else { throw StoreError(.typeMismatch, "an asset has no \(unknown.sorted().joined(separator: ", "))") }
        do { self = try Asset(sha256: hash, byteCount: size, mediaType: type, fileName: name) } catch { throw StoreError(.typeMismatch, error.message) }
    }
}
