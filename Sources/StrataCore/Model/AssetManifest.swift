import StrataLog

/// How an asset's bytes are cut into chunks: fixed 1 MiB pieces (the last one shorter), each
/// named by its own SHA-256. Chunks are what travels — an upload or download resumes at the
/// first chunk not yet held — and what is verified on arrival, before the whole asset's hash is.
///
/// The cut depends only on the bytes, so every device and the server agree on an asset's chunks.
public struct AssetManifest: Hashable, Sendable {
    /// Every chunk but the last is this long: 1 MiB.
    public static let chunkSize = 1 << 20

    /// The asset's hash and size.
    public let sha256: AssetHash
    public let byteCount: UInt64
    /// The SHA-256 of each chunk, in order.
    public let chunks: [AssetHash]

    /// A manifest, checked: there must be exactly one chunk per started MiB of `byteCount`.
    ///
    /// - Throws: ``StoreError/Code/invalidArgument`` saying what does not add up.
    public init(sha256: AssetHash, byteCount: UInt64, chunks: [AssetHash]) throws(StoreError) {
        guard byteCount <= Asset.maxByteCount else {
            throw StoreError(.invalidArgument, "asset \(sha256): size \(byteCount) is above the largest asset (\(Asset.maxByteCount) bytes)")
        }
        guard chunks.count == AssetManifest.chunkCount(byteCount) else {
            throw StoreError(.invalidArgument, "asset \(sha256): \(chunks.count) chunks for \(byteCount) bytes; expected \(AssetManifest.chunkCount(byteCount))")
        }
        self.sha256 = sha256
        self.byteCount = byteCount
        self.chunks = chunks
    }

    /// How many chunks `byteCount` bytes make.
    public static func chunkCount(_ byteCount: UInt64) -> Int {
        // Without the `+ chunkSize - 1` that would overflow near UInt64.max.
        Int(byteCount / UInt64(chunkSize) + (byteCount % UInt64(chunkSize) == 0 ? 0 : 1))
    }

    /// The length of chunk `index`.
    public func chunkLength(_ index: Int) -> Int {
        // 0 outside the asset, never a trap: an index may come from the network.
        guard index >= 0, index < chunks.count else { return 0 }
        let start = UInt64(index) * UInt64(AssetManifest.chunkSize)
        return Int(min(UInt64(AssetManifest.chunkSize), byteCount - start))
    }

    /// The byte offset of chunk `index` in the asset.
    public func chunkOffset(_ index: Int) -> Int64 { Int64(index) * Int64(AssetManifest.chunkSize) }

    /// The manifest's binary form, as a store keeps it beside an asset: `"SAM1"`, the asset's
    /// 32-byte hash, its size (`u64`), then 32 bytes per chunk.
    package var encoded: [UInt8] {
        var w = ByteWriter(capacity: 44 + 32 * chunks.count)
        w.raw(Array("SAM1".utf8))
        w.raw(sha256.bytes)
        w.u64(byteCount)
        for chunk in chunks { w.raw(chunk.bytes) }
        return w.bytes
    }

    /// Reads ``encoded``; `nil` when the bytes are not a manifest of `sha256`.
    package static func decode(_ bytes: [UInt8], expecting sha256: AssetHash) -> AssetManifest? {
        bytes.withUnsafeBytes { raw -> AssetManifest? in
            var r = ByteReader(raw)
            guard let magic = r.bytes(4), Array(magic) == Array("SAM1".utf8),
                  let hashBytes = r.bytes(32), AssetHash(bytes: hashBytes) == sha256,
                  let size = r.u64(), r.remaining % 32 == 0 else { return nil }
            var chunks: [AssetHash] = []
            chunks.reserveCapacity(r.remaining / 32)
            while r.remaining > 0 {
                guard let b = r.bytes(32), let h = AssetHash(bytes: b) else { return nil }
                chunks.append(h)
            }
            return try? AssetManifest(sha256: sha256, byteCount: size, chunks: chunks)
        }
    }
}

/// Hashes an asset's bytes as they stream past: the whole asset's SHA-256 and each chunk's,
/// so that one read of a file gives both its reference and its manifest.
package struct AssetHasher {
    private var whole = SHA256Hasher()
    private var chunk = SHA256Hasher()
    private var inChunk = 0
    package private(set) var byteCount: UInt64 = 0
    package private(set) var chunks: [AssetHash] = []

    package init() {}

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        whole.update(data: bytes)
        byteCount += UInt64(bytes.count)
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = min(rest.count, AssetManifest.chunkSize - inChunk)
            chunk.update(data: UnsafeRawBufferPointer(rebasing: rest.prefix(take)))
            inChunk += take
            rest = rest.dropFirst(take)
            if inChunk == AssetManifest.chunkSize {
                chunks.append(AssetHash(digest: chunk.finalize()))
                chunk = SHA256Hasher()
                inChunk = 0
            }
        }
    }

    /// The manifest of everything given. The hasher is spent.
    package mutating func finalize() -> AssetManifest? {
        if inChunk > 0 { chunks.append(AssetHash(digest: chunk.finalize())) }
        let hash = AssetHash(digest: whole.finalize())
        return try? AssetManifest(sha256: hash, byteCount: byteCount, chunks: chunks)
    }
}
