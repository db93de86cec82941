import Foundation
import HTTPTypes
import Hummingbird
import StrataCore
import StrataLog
import StrataProtocol

/// The asset endpoints: uploads (a manifest, then the chunks the server lacks) and downloads (the
/// manifest, then chunks), all through a zone — an asset is reachable only through a zone that
/// holds it (see ``AssetStorage``).
extension StrataServerApp {
    /// `PUT /v1/zones/{zone}/assets/{sha256}` with an ``AssetManifestBody``: starts or resumes the
    /// upload; answers the chunks still missing (``AssetUploadAnswer``).
    func beginAssetUpload(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.writableZone()
        let hash = try assetHash(context)
        // A manifest of the largest asset is ~67 bytes per MiB: bounded by the asset limit.
        let limit = 256 + 70 * AssetManifest.chunkCount(configuration.limits.maxAssetBytes)
        let body = try await readBody(request, limit: limit)
        let decoded: AssetManifestBody
        do {
            decoded = try JSONDecoder().decode(AssetManifestBody.self, from: Data(body))
        } catch {
            throw ServerError(.badRequest, "the body is not an asset manifest {\"sha256\", \"size\", \"chunkSize\", \"chunks\"}: \(error)")
        }
        let manifest: AssetManifest
        switch decoded.manifest() {
        case .success(let m): manifest = m
        case .failure(let problem): throw ServerError(.badRequest, "asset manifest: \(problem.message)")
        }
        guard manifest.sha256 == hash else {
            throw ServerError(.badRequest, "the manifest is of asset \(manifest.sha256), the path names \(hash)")
        }
        guard manifest.byteCount <= configuration.limits.maxAssetBytes else {
            throw ServerError(.tooLarge, "asset \(hash) has \(manifest.byteCount) bytes; this server accepts assets of at most \(configuration.limits.maxAssetBytes)")
        }
        try requireStillSignedIn(request, as: user)
        let state = try await storageCall { () async throws(ZoneStorageError) in
            try await storage.beginAssetUpload(zone: zone.id, user: user, manifest: manifest, storedBytesLimit: configuration.limits.maxStoredBytesPerUser,
                                               unfinishedLimits: UnfinishedUploadLimits(perUser: configuration.limits.maxUnfinishedUploadsPerUser,
                                                                                        perZone: configuration.limits.maxUnfinishedUploadsPerZone))
        }
        return try json(AssetUploadAnswer(missing: state.missing, complete: state.complete))
    }

    /// `PUT /v1/zones/{zone}/assets/{sha256}/chunks/{index}`: one chunk (raw, or an LZ4 block
    /// with `Strata-Chunk-Encoding: lz4`), checked against the manifest; the last one completes
    /// the upload.
    func putAssetChunk(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.writableZone()
        let hash = try assetHash(context)
        let index = try chunkIndex(context)
        // An LZ4 block of a chunk is at most a little larger than the chunk.
        let body = try await readBody(request, limit: AssetManifest.chunkSize + AssetManifest.chunkSize / 200 + 64)
        let bytes = try decodeChunk(body, request: request, zone: zone.id, hash: hash, index: index)
        try requireStillSignedIn(request, as: user)
        let state = try await storageCall { () async throws(ZoneStorageError) in
            try await storage.putAssetChunk(zone: zone.id, user: user, sha256: hash, index: index, bytes: bytes,
                                            storedBytesLimit: configuration.limits.maxStoredBytesPerUser)
        }
        metrics.assetBytesReceived.increment(by: Int64(body.count))
        return try json(AssetUploadAnswer(missing: state.missing, complete: state.complete))
    }

    /// `GET /v1/zones/{zone}/assets/{sha256}`: the manifest of an asset the zone holds.
    func assetManifest(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        let hash = try assetHash(context)
        guard let manifest = try await storageCall({ () async throws(ZoneStorageError) in try await storage.heldAsset(zone: zone.id, sha256: hash) }) else {
            throw Self.noSuchAsset(hash, zone.id)
        }
        // Read access checked again before anything is answered: a grant revoked (a user removed)
        // while the storage was read gets nothing of it.
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        return try json(AssetManifestBody(manifest))
    }

    /// `GET /v1/zones/{zone}/assets/{sha256}/chunks/{index}`: a chunk of an asset the zone holds,
    /// as an LZ4 block when that is at least an eighth smaller (`Strata-Chunk-Encoding: lz4`).
    func assetChunk(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        let hash = try assetHash(context)
        let index = try chunkIndex(context)
        guard let bytes = try await storageCall({ () async throws(ZoneStorageError) in try await storage.assetChunk(zone: zone.id, sha256: hash, index: index) }) else {
            throw Self.noSuchAsset(hash, zone.id)
        }
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        var headers = HTTPFields()
        headers[.contentType] = StrataMediaType.assetChunk
        var body = bytes
        if let compressed = ChunkCompression.compress(bytes) {
            headers[HTTPField.Name(StrataHeader.chunkEncoding)!] = "lz4"
            headers[HTTPField.Name(StrataHeader.chunkLength)!] = String(bytes.count)
            body = compressed
        }
        metrics.assetBytesSent.increment(by: Int64(body.count))
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// The answer to an asset the zone does not hold — absent, or held elsewhere: one answer.
    static func noSuchAsset(_ hash: AssetHash, _ zone: ZoneID) -> ServerError {
        ServerError(.assetNotFound, "zone \(zone) holds no asset \(hash)")
    }

    private func assetHash(_ context: StrataRequestContext) throws(ServerError) -> AssetHash {
        let text = context.parameters.get(StrataEndpoint.assetParameter) ?? ""
        guard let hash = AssetHash(hex: text) else {
            throw ServerError(.badRequest, "\"\(text.prefix(80))\" is not an asset's SHA-256 (64 lower-case hex digits)")
        }
        return hash
    }

    private func chunkIndex(_ context: StrataRequestContext) throws(ServerError) -> Int {
        let text = context.parameters.get(StrataEndpoint.chunkParameter) ?? ""
        guard text.count <= 9, let index = Int(text), index >= 0, String(index) == text else {
            throw ServerError(.badRequest, "\"\(text.prefix(32))\" is not a chunk index (a number from 0)")
        }
        return index
    }

    /// The chunk's bytes from the body (decompressed to at most one chunk when it says `lz4`).
    private func decodeChunk(_ body: [UInt8], request: Request, zone: ZoneID, hash: AssetHash, index: Int) throws(ServerError) -> [UInt8] {
        guard let encoding = request.headers[HTTPField.Name(StrataHeader.chunkEncoding)!] else {
            guard body.count <= AssetManifest.chunkSize else {
                throw ServerError(.tooLarge, "chunk \(index) of asset \(hash) has \(body.count) bytes; a chunk has at most \(AssetManifest.chunkSize)")
            }
            return body
        }
        guard encoding == "lz4" else {
            throw ServerError(.badRequest, "\(StrataHeader.chunkEncoding) \"\(encoding.prefix(32))\" is not one this server reads (lz4, or none)")
        }
        // An LZ4 block does not say its length: the header does, bounded by a chunk's.
        guard let text = request.headers[HTTPField.Name(StrataHeader.chunkLength)!], let length = Int(text), length > 0, length <= AssetManifest.chunkSize else {
            throw ServerError(.badRequest, "an lz4 chunk needs \(StrataHeader.chunkLength): its length, 1 to \(AssetManifest.chunkSize)")
        }
        guard let bytes = ChunkCompression.decompress(body, length: length) else {
            throw ServerError(.assetMismatch, "chunk \(index) of asset \(hash) in zone \(zone): the body is not an LZ4 block of \(length) bytes; nothing was kept")
        }
        return bytes
    }
}
