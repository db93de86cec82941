import Foundation
import Logging
@_spi(StrataInternals) import Strata
public import StrataCore
import StrataProtocol
import StrataLog

/// How far a store has synced with one zone: the last change token it applied, the replica it
/// pushes as, and the highest of that replica's sequences the server has acknowledged. Kept in
/// `sync-<zone>.json` (`sync-<zone>@<owner>.json` for another user's zone) in the store's
/// directory, replaced atomically (temporary file, fsync, rename, fsync of the directory) after
/// every step, so a restart resumes with nothing lost and nothing applied twice.
///
/// The file carries a CRC-32C of its fields; a cursor that is damaged (or fails its checksum) is
/// rebuilt from the server — the zone pulled from its start — never trusted and never fatal.
///
/// The acknowledged count belongs to `replica`: a cursor of another replica (the store forked,
/// or took a new replica ID because its log was lost) starts again from 0, and the server's
/// exactly-once check skips what it already holds.
public struct SyncCursor: Codable, Sendable, Hashable {
    public var token: String?
    /// The earlier lives of the zone that the life this cursor syncs with continues, as the
    /// server last described it (``ZoneAccessInfo/lineage``): a zone restored to one of them (a
    /// server restored from a backup taken before a recreation) is gone on into, not refused.
    public var lineage: [UInt64] = []
    /// The epoch of the zone's life this cursor syncs with, kept apart from the token (which
    /// ``SyncEngine/resync()`` drops), so that a device never pushes into a new zone under the
    /// name just because it forgot its token. `nil` before the first sync.
    public var life: UInt64?
    /// Set by ``SyncEngine/recreateZone()`` until the zone is created: the epoch of the life the
    /// recreation continues (so that a recreation interrupted before it reached the server still
    /// continues it when asked again).
    public var continuing: UInt64?
    public var acknowledged: UInt64
    /// The replica `acknowledged` counts; `nil` in cursors written before it was recorded.
    public var replica: ReplicaID?
    /// The ID of the store's log the token was applied to; `nil` in cursors written before it was
    /// recorded. A store whose log was lost (or replaced) holds none of what the token says it
    /// applied, so a cursor of another log starts over from the beginning of the zone.
    public var logID: String?
    /// Set when the zone turned out to hold less than this store has seen (the server was restored
    /// from an older copy, the zone was recreated): the store's whole state is to be uploaded to
    /// the zone (`SyncTransport/uploadState`), which brings back what the devices hold but can no
    /// longer push as events. Kept until the upload is acknowledged, so a process killed in
    /// between still heals the zone on its next sync. Absent in older cursors: `false`.
    public var healPending: Bool
    /// With a pending heal: how far a server had acknowledged `replica` before the zone lost
    /// history — what the upload claims (see `SyncTransport/uploadState`).
    public var healClaim: UInt64
    /// How far pulls (or an adopted snapshot, or an up-to-date heal) have shown the zone's
    /// history to hold `replica`'s sequences. Below `acknowledged` after a push no pull has
    /// passed yet: the token says nothing about those transactions (a server restored from a copy
    /// taken after the token but before the push lacks them, and no token shows it), so the next
    /// sync first asks the server how far it holds the replica. Once a pull brings them back, the
    /// token fingerprints a history that holds them, and a later restore is answered
    /// `410 zoneRewound`. Stored only while below `acknowledged`; absent, it equals it.
    public var pulledBack: UInt64

    public init(token: String? = nil, acknowledged: UInt64 = 0, replica: ReplicaID? = nil, logID: String? = nil,
                healPending: Bool = false, healClaim: UInt64 = 0, pulledBack: UInt64? = nil) {
        self.token = token
        self.acknowledged = acknowledged
        self.replica = replica
        self.logID = logID
        self.healPending = healPending
        self.healClaim = healClaim
        self.pulledBack = pulledBack ?? acknowledged
    }

    /// Acknowledged sequences no pull has brought back yet (see ``pulledBack``).
    var pushUnconfirmed: Bool { pulledBack < acknowledged }

    /// Forgets what the server acknowledged (it lost history, or another replica is counted):
    /// everything is pushed again, and the server's exactly-once check skips what it holds.
    mutating func forgetAcknowledged() {
        acknowledged = 0
        pulledBack = 0
    }

    /// Marks a heal pending, claiming what the server had acknowledged so far (kept across a
    /// reset of `acknowledged`, and the larger of two claims).
    mutating func needHeal(replica current: ReplicaID) {
        if replica == current { healClaim = max(healClaim, acknowledged) }
        healPending = true
    }

    /// A cursor that starts over against a zone that lost what this store synced with it (deleted
    /// and recreated): no token, nothing acknowledged, and a heal pending that still claims what a
    /// server had acknowledged to `current` before.
    func startingOver(replica current: ReplicaID, logID: String?) -> SyncCursor {
        var fresh = self
        fresh.needHeal(replica: current)
        return SyncCursor(replica: current, logID: logID, healPending: true,
                          healClaim: replica == current ? fresh.healClaim : 0)
    }

    enum CodingKeys: String, CodingKey { case token, acknowledged, replica, logID, healPending, healClaim, pulledBack, lineage, life, continuing }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        token = try c.decodeIfPresent(String.self, forKey: .token)
        acknowledged = try c.decode(UInt64.self, forKey: .acknowledged)
        replica = try c.decodeIfPresent(ReplicaID.self, forKey: .replica)
        logID = try c.decodeIfPresent(String.self, forKey: .logID)
        healPending = try c.decodeIfPresent(Bool.self, forKey: .healPending) ?? false
        healClaim = try c.decodeIfPresent(UInt64.self, forKey: .healClaim) ?? 0
        pulledBack = try c.decodeIfPresent(UInt64.self, forKey: .pulledBack) ?? acknowledged
        lineage = Array((try c.decodeIfPresent([UInt64].self, forKey: .lineage) ?? []).prefix(64))
        life = try c.decodeIfPresent(UInt64.self, forKey: .life)
        continuing = try c.decodeIfPresent(UInt64.self, forKey: .continuing)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(token, forKey: .token)
        try c.encode(acknowledged, forKey: .acknowledged)
        try c.encodeIfPresent(replica, forKey: .replica)
        try c.encodeIfPresent(logID, forKey: .logID)
        if healPending {
            try c.encode(true, forKey: .healPending)
            try c.encode(healClaim, forKey: .healClaim)
        }
        if pushUnconfirmed { try c.encode(pulledBack, forKey: .pulledBack) }
        if !lineage.isEmpty { try c.encode(lineage, forKey: .lineage) }
        try c.encodeIfPresent(life, forKey: .life)
        try c.encodeIfPresent(continuing, forKey: .continuing)
    }

    /// Whether the store has synced with the zone (its cursor file exists).
    static func exists(store: Store, zone: ZoneReference) -> Bool {
        FileManager.default.fileExists(atPath: path(store: store, zone: zone))
    }

    static func path(store: Store, zone: ZoneReference) -> String {
        store.directory + "/" + fileName(zone)
    }

    /// The cursor's file name; the owner's name is kept to file-name-safe characters.
    static func fileName(_ zone: ZoneReference) -> String {
        guard let owner = zone.owner else { return "sync-\(zone.name).json" }
        let safe = owner.unicodeScalars.map { scalar -> String in
            let c = Character(scalar)
            return c.isASCII && (c.isLetter || c.isNumber || c == "." || c == "_" || c == "-") ? String(c) : String(format: "%%%02X", scalar.value)
        }.joined()
        return "sync-\(zone.name)@\(safe).json"
    }

    static func load(store: Store, zone: ZoneReference, logger: Logger) throws -> SyncCursor {
        let path = path(store: store, zone: zone)
        let identity = store.identity
        guard FileManager.default.fileExists(atPath: path) else { return SyncCursor(replica: identity.replicaID, logID: identity.logID) }
        guard let data = FileManager.default.contents(atPath: path), let decoded = decode(Array(data)) else {
            // A damaged cursor is rebuilt rather than trusted or fatal: pulling the zone from its
            // start is idempotent (the store skips what it has), and pushing from sequence 1 is
            // answered from what the server holds (its exactly-once check skips the same bytes).
            logger.warning("the sync cursor is damaged; syncing again from the start of the zone", metadata: ["path": "\(path)"])
            return SyncCursor(replica: identity.replicaID, logID: identity.logID)
        }
        var cursor = decoded
        if let logID = cursor.logID, logID != identity.logID {
            cursor = SyncCursor()
        }
        cursor.logID = identity.logID
        cursor.bind(to: identity.replicaID)
        return cursor
    }

    /// A cursor file's contents, `nil` when they do not decode or their checksum differs.
    static func decode(_ bytes: [UInt8]) -> SyncCursor? {
        guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)),
              file.checksum == nil || file.checksum == file.cursor.checksum else { return nil }
        return file.cursor
    }

    /// The cursors kept in the directory of the store at `directory` (`sync-<zone>.json`,
    /// `sync-<zone>@<owner>.json`), by file name in order, each read and checked the way an
    /// engine reads its own — `nil` for a damaged one. Reads only: for tools that look at a store
    /// without opening it.
    public static func cursors(inStoreAt directory: String) -> [(file: String, cursor: SyncCursor?)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("sync-") && $0.hasSuffix(".json") && $0 != "sync-pins.json" }.sorted().map { name in
            (name, FileManager.default.contents(atPath: directory + "/" + name).flatMap { decode(Array($0)) })
        }
    }

    /// Makes the cursor count `replica`'s sequences: a cursor of another replica (or of none)
    /// forgets its acknowledged count (the server's exactly-once check skips what it holds).
    mutating func bind(to replica: ReplicaID) {
        if self.replica != replica {
            forgetAcknowledged()
            healClaim = 0
            self.replica = replica
        }
    }

    /// The file: the cursor's fields and a CRC-32C of them (`checksum`, absent in cursors written
    /// before it), so that a damaged cursor is noticed rather than believed.
    private struct File: Codable {
        var cursor: SyncCursor
        var checksum: String?

        init(cursor: SyncCursor) {
            self.cursor = cursor
            self.checksum = cursor.checksum
        }

        init(from decoder: any Decoder) throws {
            cursor = try SyncCursor(from: decoder)
            checksum = try decoder.container(keyedBy: Key.self).decodeIfPresent(String.self, forKey: .checksum)
        }

        func encode(to encoder: any Encoder) throws {
            try cursor.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encodeIfPresent(checksum, forKey: .checksum)
        }

        enum Key: String, CodingKey { case checksum }
    }

    /// CRC-32C (hex) of the fields, in a fixed order.
    var checksum: String {
        // A pending heal and an unconfirmed push join the fields only when set, so cursors
        // written before them keep their sum.
        let fields = [token ?? "", String(acknowledged), replica?.description ?? "", logID ?? ""]
            + (healPending ? ["heal \(healClaim)"] : []) + (pushUnconfirmed ? ["pulled \(pulledBack)"] : [])
        let text = fields.joined(separator: "\n")
        return String(CRC32C.checksum(Array(text.utf8)), radix: 16)
    }

    func save(store: Store, zone: ZoneReference) throws {
        let path = Self.path(store: store, zone: zone)
        do {
            let data = try JSONEncoder().encode(File(cursor: self))
            try FileSystem.writeAtomically(Array(data), to: path)
            // Compaction keeps what this engine has not pushed yet.
            if replica == store.replicaID { try store.pinUnpushed(Self.fileName(zone), acknowledged: acknowledged) }
        } catch {
            throw SyncError(.store, "cannot save the sync cursor \(path): \(error)")
        }
    }
}

extension SyncCursor {
    /// The epoch of the zone's life this cursor syncs with: its token's, else the one it kept
    /// (``life``); `nil` when it knows none.
    var lifeEpoch: UInt64? {
        guard let token, let parsed = try? ChangeToken(parsing: token) else { return life }
        return parsed.epoch
    }
}
