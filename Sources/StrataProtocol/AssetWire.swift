public import StrataCore

/// An asset's manifest on the wire: `{"sha256": "<hex>", "size": n, "chunkSize": 1048576,
/// "chunks": ["<hex>", …]}` — the body of `PUT /v1/zones/{zone}/assets/{sha256}` and the answer
/// to its `GET`. `chunkSize` is always 1 MiB (`AssetManifest.chunkSize`, in `StrataCore`); a body naming another
/// is refused, so that a later protocol may change it without being misread.
public struct AssetManifestBody: Sendable, Hashable, Codable {
    public var sha256: String
    public var size: UInt64
    public var chunkSize: Int
    public var chunks: [String]

    public init(_ manifest: AssetManifest) {
        sha256 = manifest.sha256.hex
        size = manifest.byteCount
        chunkSize = AssetManifest.chunkSize
        chunks = manifest.chunks.map(\.hex)
    }

    /// The manifest, checked (hex digits, chunk size, one chunk per started MiB); `nil` and what
    /// is wrong otherwise.
    public func manifest() -> Result<AssetManifest, ManifestProblem> {
        guard let hash = AssetHash(hex: sha256) else { return .failure(.init("\"sha256\" is not 64 lower-case hex digits")) }
        guard chunkSize == AssetManifest.chunkSize else {
            return .failure(.init("\"chunkSize\" is \(chunkSize); this protocol cuts assets into chunks of \(AssetManifest.chunkSize) bytes"))
        }
        var hashes: [AssetHash] = []
        hashes.reserveCapacity(chunks.count)
        for (index, text) in chunks.enumerated() {
            guard let chunk = AssetHash(hex: text) else { return .failure(.init("chunk \(index)'s hash is not 64 lower-case hex digits")) }
            hashes.append(chunk)
        }
        do {
            return .success(try AssetManifest(sha256: hash, byteCount: size, chunks: hashes))
        } catch {
            return .failure(.init(error.message))
        }
    }

    /// Why a manifest body is refused.
    public struct ManifestProblem: Error, Sendable {
        public let message: String
        init(_ message: String) { self.message = message }
    }
}

/// The answer to an upload's manifest or chunk: `{"missing": [index, …], "complete": bool}` —
/// the chunks the server still lacks, and whether the zone now holds the asset.
public struct AssetUploadAnswer: Sendable, Hashable, Codable {
    public var missing: [Int]
    public var complete: Bool

    public init(missing: [Int], complete: Bool) {
        self.missing = missing
        self.complete = complete
    }
}
