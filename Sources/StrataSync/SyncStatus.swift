/// Where the engine is, for a status display.
public struct SyncStatus: Sendable, Hashable {
    /// What the engine is doing.
    ///
    /// ```swift
    /// for await status in await engine.statusUpdates() {
    ///     switch status.phase {
    ///     case .unauthorized: showSignInPrompt()      // resumes by itself once the tokens work
    ///     case .updateRequired: showUpdatePrompt()     // the zone needs a newer app version
    ///     case .backingOff: showOfflineBadge(status.pending)
    ///     default: hideBanners()
    ///     }
    /// }
    /// ```
    public enum Phase: String, Sendable, Hashable {
        case idle, pushing, pulling, waiting, backingOff, stopped
        /// The server refused the credentials, and the fresh token the ``TokenProvider`` gave
        /// after that was refused too (revoked, or the user signed out): the app should let the
        /// user sign in again. Continuous mode keeps trying with a growing backoff
        /// (``SyncOptions/unauthorizedBackoff``), asking the provider for a fresh token once per
        /// try — never in a tight loop — and goes on by itself once a token works.
        case unauthorized
        /// The zone no longer syncs with this app's schema version (`schemaTooOld`;
        /// ``SyncError/minSchemaVersion`` of ``SyncStatus/lastError`` says the version to update
        /// to): the app should ask the user to update. The edits stay on the device. Continuous
        /// mode keeps asking with the long backoff of ``SyncOptions/unauthorizedBackoff`` (the
        /// zone's owner may lower the minimum again) and goes on by itself once it is let in.
        case updateRequired
    }

    public var phase: Phase
    /// Local transactions with edits not yet acknowledged by the server (what
    /// `Store.unpushedChangeCount()` counts, for this engine's zone). Kept right while the server
    /// cannot be reached: counted from the store before every round and after every local
    /// commit. Records of the app's schema are pushed too but are not counted.
    public var pending: Int
    /// Why the pending transactions cannot be pushed now (read-only access to the zone); `nil`
    /// when they can, or when nothing but schema records waits.
    public var blocked: String?
    /// Transactions pushed and pulled since the engine started.
    public var pushed: Int
    public var pulled: Int
    public var lastError: SyncError?
    /// How far this device's wall clock is behind the zone, when by more than
    /// ``SyncOptions/clockBehindWarning`` (an hour by default): the newest change pulled is
    /// stamped that far past the device's time, and the server accepts no stamp more than a few
    /// minutes past its own. An edit of an object is still ordered after everything the device
    /// has seen of that object, whatever the wall clock says; but new objects are stamped with
    /// the device's time (the clock takes in remote stamps only up to an hour past it), so they
    /// sort before changes made elsewhere meanwhile, and times the app shows are wrong: tell the
    /// user to set the clock. A lower bound, from the newest change pulled since the engine
    /// started (recomputed after every pull); `nil` when the clock is not found behind.
    public var clockBehind: Duration? = nil
}
