public import StrataCore
public import StrataProtocol

/// Where a pull starts, shared by the HTTP endpoint and in-process transports (simulations), so
/// both answer the same tokens the same way.
public enum PullStart {
    /// The change token of `zone` at `position`, with the fingerprint of the history before it.
    public static func token(_ zone: ZoneInfo, at position: UInt64, storage: any ZoneStorage) async throws(ServerError) -> ChangeToken {
        try await token(zone, at: position, fingerprint: nil, storage: storage)
    }

    /// ``token(_:at:storage:)`` with the fingerprint at `position` when the caller has it (an
    /// append's outcome), else read from the storage.
    public static func token(_ zone: ZoneInfo, at position: UInt64, fingerprint known: UInt64?, storage: any ZoneStorage) async throws(ServerError) -> ChangeToken {
        do {
            var token = zone.token(at: position)
            if let known {
                token.fingerprint = known
            } else {
                token.fingerprint = try await storage.fingerprint(zone: zone.id, at: position) ?? 0
            }
            return token
        } catch {
            throw ServerError(error)
        }
    }

    /// The position a pull after `token` reads from.
    ///
    /// - A token is checked against the zone: another epoch is `410 zoneReset`; a position before
    ///   the zone's history (compacted away) or an earlier generation (handed out before a state
    ///   was merged) `410 tokenExpired`; a position past its end or a later generation
    ///   `410 zoneRewound` (the server holds less than the client saw).
    /// - Without a token, a zone that has a snapshot answers `410 tokenExpired`: the client
    ///   starts from the snapshot (then pulls after its token), since the log may no longer hold
    ///   what the snapshot does — compacted history, or a state a device uploaded. A zone without
    ///   one starts at position 0.
    public static func position(after token: String?, zone: ZoneInfo, storage: any ZoneStorage) async throws(ServerError) -> UInt64 {
        let id = zone.id
        do {
            guard let token, !token.isEmpty else {
                if let snapshot = try await storage.snapshotPosition(zone: id) {
                    throw ServerError(.tokenExpired, "zone \(id) starts from its snapshot (at position \(snapshot)): fetch it, then pull after its token")
                }
                return try await storage.startPosition(zone: id)
            }
            let parsed: ChangeToken
            do {
                parsed = try ChangeToken(parsing: token)
                let start = try await storage.startPosition(zone: id)
                let end = try await storage.endPosition(zone: id)
                try parsed.validate(epoch: zone.epoch, merges: zone.merges, start: start, end: end)
                if parsed.fingerprint != 0 {
                    let actual = parsed.fingerprintsHistory
                        ? try await storage.fingerprint(zone: id, at: parsed.position)
                        : try await storage.lastTransactionFingerprint(zone: id, at: parsed.position)
                    try parsed.validate(fingerprint: actual)
                } else if parsed.position > 0, let actual = try await storage.fingerprint(zone: id, at: parsed.position), actual != 0 {
                    // A token without a fingerprint where the server would have given it one (a
                    // version 1 or 2 token, or one edited by hand): nothing says the client saw
                    // this history up to its position, so it is not skipped. Without a snapshot
                    // the pull reads from the zone's start (applying what the client has again
                    // changes nothing); with one, the client starts again from the snapshot.
                    guard try await storage.snapshotPosition(zone: id) != nil else {
                        return try await storage.startPosition(zone: id)
                    }
                    throw ServerError(.tokenExpired, "change token \(parsed) carries no fingerprint of the history before position \(parsed.position), which zone \(id) has: start again from the zone's snapshot")
                }
            } catch let error as ChangeTokenError {
                throw ServerError(error)
            }
            return parsed.position
        } catch let error as ServerError {
            throw error
        } catch let error as ZoneStorageError {
            throw ServerError(error)
        } catch {
            throw ServerError(.internalError, "zone \(id): \(error)")
        }
    }
}

/// The checks of an uploaded state that need no storage: it decodes as a projection snapshot, and
/// none of its stamps is further ahead of the server's clock than a push may be (a stamp far ahead
/// would win every later edit).
public enum StateValidation {
    /// The checked state (a `StateUpload`: never decoded whole), or the error to answer
    /// (`badRequest` for a payload that is not a projection snapshot in the documented layout —
    /// objects in strictly ascending ID order among it —, `clockSkew`).
    public static func validate(_ payload: [UInt8], now: UInt64, maxClockOffset: Duration) throws(ServerError) -> StateUpload {
        let state: StateUpload
        do {
            state = try StateUpload(payload: payload)
        } catch {
            throw ServerError(.badRequest, "the uploaded state is not a projection snapshot: \(error)")
        }
        let maxOffset = UInt64(max(0, maxClockOffset / .milliseconds(1)))
        let newest = state.newestTimestamp.milliseconds
        if newest > now &+ maxOffset {
            throw ServerError(.clockSkew,
                              "the uploaded state holds a value stamped \(newest) ms since 1970, \(newest &- now) ms ahead of the server's clock (\(now)); at most \(maxOffset) ms are accepted — check the device's clock",
                              serverTime: now, maxOffset: maxOffset)
        }
        return state
    }
}
