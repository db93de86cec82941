/// The protocol's own HTTP headers.
public enum StrataHeader {
    /// The change token after the transactions of a pull's answer.
    public static let nextToken = "Strata-Next-Token"
    /// `true` when the zone held more transactions than the pull returned.
    public static let moreComing = "Strata-More-Coming"
    /// `true` on a pull answered while the server shuts down (absent otherwise).
    public static let shuttingDown = "Strata-Shutting-Down"
    /// The change token of the position a snapshot answer is at.
    public static let snapshotToken = "Strata-Snapshot-Token"
    /// On an asset chunk's body (either way): `lz4` when the body is the chunk as an LZ4 block
    /// (absent: the chunk's bytes as they are).
    public static let chunkEncoding = "Strata-Chunk-Encoding"
    /// With ``chunkEncoding`` `lz4`: the chunk's length (an LZ4 block does not say it).
    public static let chunkLength = "Strata-Chunk-Length"
    /// On any request (optional): the user the client expects its token to sign in — the user a
    /// device's database belongs to. Another user is answered `409 anotherUser`, and nothing is
    /// done, so that a user signed in on a device where another synced never syncs the other's
    /// data under their own account.
    public static let user = "Strata-User"
    /// On a pull's or a snapshot's answer to a request with `omit`: the download mask the server
    /// applied (its canonical text form). A client that sent a mask and finds no such header (an
    /// older server, which ignores `omit`) refuses the answer rather than store what it masks.
    public static let omitted = "Strata-Omitted"
    /// On a request (optional, 1 when absent): the schema version of the app that sends it. A zone
    /// with a higher `minSchemaVersion` answers its pushes, pulls, snapshots and states
    /// `426 schemaTooOld`.
    public static let schemaVersion = "Strata-Schema-Version"
}

/// The protocol's media types.
public enum StrataMediaType {
    /// Push and pull bodies: framed transactions (see ``TransactionFrames``).
    public static let transactions = TransactionFrames.mediaType
    /// A zone's snapshot, and a state a device uploads: a `StrataCore` projection snapshot payload.
    public static let snapshot = "application/x-strata-snapshot"
    /// An asset's chunk (its bytes, or an LZ4 block of them with ``StrataHeader/chunkEncoding``).
    public static let assetChunk = "application/octet-stream"
}
