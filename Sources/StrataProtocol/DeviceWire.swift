/// The release of Strata a device runs, as it reports it to the server's device registry
/// (``DeviceReport/library``): so that an operator can tell which release a divergent device
/// runs. Raised with each release; `strata --version` prints the same release.
public enum StrataLibraryVersion {
    public static let release = "0.16.0"
    public static let current = "strata-swift/\(release)"
}

/// The body of `POST /v1/zones/{zone}/devices`: a device says, after a sync, which state it holds
/// at which point of the zone — the digest of its store's state (the same canonical SHA-256 as
/// `Store.digest()`) at its change token — and how much it has not pushed yet. The server
/// compares the digest with the zone's own state at the token's position and keeps the report in
/// the zone's device registry.
///
/// Everything here is the device's claim, bounded and checked: the replica must be the caller's
/// (or new to the zone), the token must be a token of this zone's life that the server could have
/// handed out, and the time the server records is its own.
public struct DeviceReport: Sendable, Hashable, Codable {
    /// Longest ``library`` text.
    public static let maxLibraryLength = 64

    /// The device's replica ID.
    public var replica: String
    /// The change token the state is at (what the device's last pull ended with).
    public var token: String
    /// The state's digest: 64 lower-case hex digits; `nil` when the device did not compute it
    /// (its state would not be compared: it has unpushed transactions, or a download mask).
    public var digest: String?
    /// The device's own transactions the zone has not acknowledged yet: a state with any is
    /// ahead of the zone, and not compared.
    public var pendingTransactions: UInt64
    /// Assets the device's transactions name that it has not uploaded yet.
    public var pendingAssets: UInt64
    /// Whether the device downloads the zone with a download mask: its state is then of what the
    /// mask lets in, and not compared with the whole zone's.
    public var masked: Bool
    /// The library the device runs (``StrataLibraryVersion/current``), at most
    /// ``maxLibraryLength`` printable ASCII characters.
    public var library: String

    public init(replica: String, token: String, digest: String?, pendingTransactions: UInt64, pendingAssets: UInt64, masked: Bool,
                library: String = StrataLibraryVersion.current) {
        self.replica = replica
        self.token = token
        self.digest = digest
        self.pendingTransactions = pendingTransactions
        self.pendingAssets = pendingAssets
        self.masked = masked
        self.library = library
    }

    /// Whether `text` is a state digest as reports carry it: 64 lower-case hex digits.
    public static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Whether `text` may be a ``library``: 1 to ``maxLibraryLength`` printable ASCII characters.
    public static func isLibrary(_ text: String) -> Bool {
        (1...maxLibraryLength).contains(text.utf8.count) && text.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }
}

/// What the server found of a device's state (``DeviceReport``).
public enum DeviceStateCheck: String, Sendable, Hashable, Codable, CaseIterable {
    /// The device's digest equals the zone's at the same position.
    case consistent
    /// It differs: the device holds another state than the zone at the same point of its
    /// history. `strata diff STORE --server URL --zone Z` on the device names where.
    case divergent
    /// Not compared (the reason says why): the device has edits it has not pushed, downloads
    /// with a mask, or stands before the zone's snapshot.
    case unverified
}

/// The answer to a ``DeviceReport``.
public struct DeviceVerdict: Sendable, Hashable, Codable {
    public var check: DeviceStateCheck
    /// Why the state was not compared, or how it differs.
    public var reason: String?
    /// The position the report's token names.
    public var position: UInt64
    /// The zone's state digest at ``position``, when the server computed it.
    public var zoneDigest: String?

    public init(check: DeviceStateCheck, reason: String?, position: UInt64, zoneDigest: String?) {
        self.check = check
        self.reason = reason
        self.position = position
        self.zoneDigest = zoneDigest
    }
}

/// A device as the zone's registry holds it: its last report, who sent it and when, and what
/// the server found.
public struct DeviceEntry: Sendable, Hashable, Codable {
    public var replica: String
    /// The user who reported (signed in).
    public var user: String
    /// When the server received the last report: milliseconds since 1970 by the server's clock.
    public var lastSeen: UInt64
    public var token: String
    public var position: UInt64
    /// The device's state digest (`nil`: not computed, see ``DeviceReport/digest``).
    public var digest: String?
    public var pendingTransactions: UInt64
    public var pendingAssets: UInt64
    public var masked: Bool
    public var library: String
    /// The app schema version of the report's request (`Strata-Schema-Version`), when it said.
    public var schemaVersion: Int?
    public var check: DeviceStateCheck
    public var reason: String?
    public var zoneDigest: String?

    public init(replica: String, user: String, lastSeen: UInt64, token: String, position: UInt64, digest: String?,
                pendingTransactions: UInt64, pendingAssets: UInt64, masked: Bool, library: String, schemaVersion: Int?,
                check: DeviceStateCheck, reason: String?, zoneDigest: String?) {
        self.replica = replica
        self.user = user
        self.lastSeen = lastSeen
        self.token = token
        self.position = position
        self.digest = digest
        self.pendingTransactions = pendingTransactions
        self.pendingAssets = pendingAssets
        self.masked = masked
        self.library = library
        self.schemaVersion = schemaVersion
        self.check = check
        self.reason = reason
        self.zoneDigest = zoneDigest
    }

    /// The verdict the entry holds.
    public var verdict: DeviceVerdict { DeviceVerdict(check: check, reason: reason, position: position, zoneDigest: zoneDigest) }
}

/// `GET /v1/zones/{zone}/devices` (its owner only): the zone's device registry, most recently
/// seen first, with the zone's life and end so that a reader can tell each device's lag.
public struct ZoneDevices: Sendable, Hashable, Codable {
    /// The zone's owner and name.
    public var owner: String
    public var name: String
    public var epoch: UInt64
    /// The zone's end position now.
    public var end: UInt64
    public var devices: [DeviceEntry]
    /// How many of ``devices`` are ``DeviceStateCheck/divergent``.
    public var divergent: Int

    public init(owner: String, name: String, epoch: UInt64, end: UInt64, devices: [DeviceEntry]) {
        self.owner = owner
        self.name = name
        self.epoch = epoch
        self.end = end
        self.devices = devices
        self.divergent = devices.filter { $0.check == .divergent }.count
    }
}
