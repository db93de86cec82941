/// Who may read a zone besides its owner.
public enum ZoneAccess: String, Sendable, Hashable, Codable, CaseIterable {
    /// Only the owner.
    case `private`
    /// The owner and the users named in the zone's grants.
    case shared
    /// Every authenticated user may read; only the owner (and `readWrite` grantees) may push.
    case `public`
}

/// What a user named in a zone's grants may do.
public enum ZoneGrant: String, Sendable, Hashable, Codable, CaseIterable {
    /// Read (pull and look at the zone).
    case read
    /// Read and push.
    case readWrite
}
