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
}

/// The protocol's media types.
public enum StrataMediaType {
    /// Push and pull bodies: framed transactions (see ``TransactionFrames``).
    public static let transactions = TransactionFrames.mediaType
    /// A zone's snapshot, and a state a device uploads: a `StrataCore` projection snapshot payload.
    public static let snapshot = "application/x-strata-snapshot"
}
