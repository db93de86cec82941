/// A zone's identity: its owner and its name, as CloudKit's `CKRecordZone.ID(zoneName:ownerName:)`.
///
/// Two users may each have a zone called `notes`; they are different zones. A zone is only ever
/// created in its creator's own namespace, so nobody can take a name in another user's namespace,
/// and a client that syncs with someone else's zone must name its owner.
///
/// ```swift
/// let mine = ZoneID(owner: "alice", name: "notes")
/// let shared = ZoneID(owner: "bob", name: "notes")   // a different zone
/// ```
public struct ZoneID: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// The user in whose namespace the zone lives (its creator).
    public var owner: String
    public var name: String

    public init(owner: String, name: String) {
        self.owner = owner
        self.name = name
    }

    /// `owner/name`, for messages and logs.
    public var description: String { "\(owner)/\(name)" }

    public static func < (a: ZoneID, b: ZoneID) -> Bool {
        (a.owner, a.name) < (b.owner, b.name)
    }
}
