import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StrataCore
import StrataLog
import StrataProtocol

extension StrataServerApp {
    /// `POST /v1/zones/{zone}/push`: appends a batch of one replica's transactions, exactly once.
    /// The replica must be the caller's (or new), its retried transactions the same bytes, and no
    /// event stamped too far ahead of the server's clock.
    func push(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.writableZone()
        try Self.requireSchemaVersion(request, zone)
        let id = zone.id
        // The life the device syncs with, when it says: a push meant for a zone's previous life
        // (deleted and created again since the device's last sync) takes nothing.
        var life = zone.epoch
        if let text = request.uri.queryParameters.get(StrataQuery.epoch), !text.isEmpty {
            guard let claimed = UInt64(String(text)) else {
                throw ServerError(.badRequest, "epoch \"\(text.prefix(32))\" is not a zone epoch (an unsigned 64-bit number)")
            }
            guard claimed == zone.epoch else {
                throw ServerError(.zoneReset, "zone \(id) was deleted and created again since this device synced with it (epoch \(claimed)); nothing was appended")
            }
            life = claimed
        }
        let body = try await readBody(request)
        let frames: [[UInt8]]
        do {
            frames = try TransactionFrames.decode(body)
        } catch {
            throw ServerError(.badRequest, "the push body is not framed transactions: \(error)")
        }
        let (replica, transactions) = try PushValidation.validate(frames, now: clock.wallMilliseconds(), maxClockOffset: configuration.limits.maxClockOffset)
        // The body may have taken minutes: the pusher must still be a user (the zone's access is
        // checked again by the storage, under the append's lock).
        try requireStillSignedIn(request, as: user)
        // Every asset a transaction names must be held by the zone before the transaction is
        // taken: no device ever pulls a reference to bytes it cannot fetch.
        let named = PushedTransaction.assetsNamed(by: transactions)
        if !named.isEmpty {
            let unheld = try await storageCall { () async throws(ZoneStorageError) in
                try await storage.unheldAssets(zone: id, user: user, assets: named)
            }
            if !unheld.isEmpty {
                throw ServerError(.assetMissing, "the push names \(unheld.count) asset(s) zone \(id) does not hold (\(unheld.prefix(3).map(\.hex).joined(separator: ", "))\(unheld.count > 3 ? ", …" : "")): upload them to the zone first; nothing was appended",
                                  assets: unheld.map(\.hex))
            }
        }
        let outcome = try await storageCall { () async throws(ZoneStorageError) in
            // Into the zone's life the request looked up: one deleted and created again while the
            // body arrived refuses (`410 zoneReset`) rather than take the previous life's edits.
            try await storage.append(zone: id, epoch: life, user: user, replica: replica, transactions: transactions,
                                     storedBytesLimit: configuration.limits.maxStoredBytesPerUser)
        }
        metrics.pushTransactions.increment(by: Int64(outcome.appended))
        zoneActivity.record(id, transactions: outcome.appended, at: clock.wallMilliseconds())
        metrics.pushBytes.increment(by: Int64(body.count))
        if outcome.appended > 0 {
            notifier.notify(zone: id.description, users: Self.databaseUsers(of: zone))
            webhooks?.zoneChanged(id, metrics: metrics)
            logger.info("push appended", metadata: [
                "zone": "\(id)", "user": "\(user)", "replica": "\(replica)",
                "transactions": "\(outcome.appended)", "acknowledged": "\(outcome.acknowledged)", "end": "\(outcome.position)",
            ])
        } else {
            logger.debug("push already held", metadata: ["zone": "\(id)", "replica": "\(replica)", "acknowledged": "\(outcome.acknowledged)"])
        }
        return try json(PushAnswer(token: try await PullStart.token(zone, at: outcome.position, fingerprint: outcome.fingerprint, storage: storage).description,
                                   acknowledged: outcome.acknowledged))
    }

    /// `POST /v1/zones/{zone}/state?after=&replica=&through=`: merges a device's whole state (a projection
    /// snapshot) into the zone, to heal history the zone lost (see
    /// ``ZoneStorage/mergeState(zone:user:replica:claim:state:basis:)``). `after` is the token the
    /// device had pulled through (the answer says whether that was the zone's end, so that it goes
    /// on from the new token without downloading the merged snapshot); `replica` the device's own
    /// replica and `through` how far a server had acknowledged it: those sequences count as held.
    func uploadState(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.writableZone()
        try Self.requireSchemaVersion(request, zone)
        let id = zone.id
        let basis: UInt64? = await {
            guard let after = request.uri.queryParameters.get(StrataQuery.after), !after.isEmpty else { return nil }
            return try? await PullStart.position(after: String(after), zone: zone, storage: storage)
        }()
        var replica: ReplicaID?
        if let text = request.uri.queryParameters.get(StrataQuery.replica), !text.isEmpty {
            guard let parsed = ReplicaID(String(text)) else {
                throw ServerError(.badRequest, "replica \"\(text.prefix(64))\" is not a replica ID (a UUID)")
            }
            guard !Projection.isCredited(parsed) else {
                throw ServerError(.badRequest, "replica \(parsed) is of the range the server credits merged states to (its upper 64 bits all ones); a device never has such an ID")
            }
            replica = parsed
        }
        var claim: UInt64 = 0
        if let text = request.uri.queryParameters.get(StrataQuery.through), !text.isEmpty {
            guard let parsed = UInt64(String(text)) else {
                throw ServerError(.badRequest, "through \"\(text.prefix(32))\" is not a sequence number")
            }
            claim = parsed
        }
        // Before the body is read: repeated uploads neither hold the memory budget nor churn
        // the zone's merges (and every device's token).
        if let wait = await stateUploadLimiter.acquire(user) {
            let seconds = max(1, Int((Double(wait / .nanoseconds(1)) / 1e9).rounded(.up)))
            throw ServerError(.rateLimited, "user \(user) is over the rate of state uploads (\(stateUploadLimiter.limit.burst) at once, then one every \(Int((1 / stateUploadLimiter.limit.requestsPerSecond).rounded())) s); retry in \(seconds) s",
                              retryAfter: seconds)
        }
        let payload = try await readBody(request, limit: configuration.limits.maxStateBytes)
        try await checkStoredBytes(id, adding: payload.count)
        let state = try StateValidation.validate(payload, now: clock.wallMilliseconds(), maxClockOffset: configuration.limits.maxClockOffset)
        // Called directly, not through `storageCall`: the decoded state is handed over to the
        // storage, which a closure capturing it could not do.
        try requireStillSignedIn(request, as: user)
        // As for a push: every asset the state names must be held by the zone first.
        if !state.namedAssets.isEmpty {
            let named = state.namedAssets
            let unheld = try await storageCall { () async throws(ZoneStorageError) in
                try await storage.unheldAssets(zone: id, user: user, assets: named)
            }
            if !unheld.isEmpty {
                throw ServerError(.assetMissing, "the state names \(unheld.count) asset(s) zone \(id) does not hold (\(unheld.prefix(3).map(\.hex).joined(separator: ", "))\(unheld.count > 3 ? ", …" : "")): upload them to the zone first; nothing was merged",
                                  assets: unheld.map(\.hex))
            }
        }
        let outcome: StateMergeOutcome
        do {
            outcome = try await storage.mergeState(zone: id, epoch: zone.epoch, user: user, replica: replica, claim: claim, state: state, basis: basis)
        } catch {
            throw answer(error)
        }
        if outcome.merged {
            notifier.notify(zone: id.description, users: Self.databaseUsers(of: zone))
            webhooks?.zoneChanged(id, metrics: metrics)
        }
        logger.notice(outcome.merged ? "state merged" : "state brought nothing new",
                      metadata: ["zone": "\(id)", "user": "\(user)", "bytes": "\(payload.count)", "position": "\(outcome.position)"])
        var merged = zone
        if merged.generation != outcome.generation { merged.merges.append(outcome.generation) }
        return try json(StateAnswer(token: try await PullStart.token(merged, at: outcome.position, storage: storage).description,
                                    upToDate: outcome.upToDate, acknowledged: outcome.acknowledged))
    }

    /// `GET /v1/zones/{zone}/replicas`: every replica the zone holds events of, the user it
    /// belongs to (who pushed its events) and the highest sequence held — to the zone's owner;
    /// anyone else gets only their own replicas (another user's replica IDs are not handed out).
    func replicas(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        var replicas = try await storageCall { () async throws(ZoneStorageError) in try await storage.replicas(zone: zone.id) }
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        if user != zone.id.owner { replicas = replicas.filter { $0.user == user } }
        return try json(ReplicaList(replicas: replicas))
    }

    /// `GET /v1/zones/{zone}/changes?after=&limit=&wait=`: the transactions after a token, as
    /// frames; with `wait`, a long poll.
    func changes(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let name = zone.id
        let query = request.uri.queryParameters

        let limit = try pullLimit(query.get(StrataQuery.limit))
        let wait = try pullWait(query.get(StrataQuery.wait))
        let mask = try downloadMask(query.get(StrataQuery.omit))
        let puller = try pullingReplica(query.get(StrataQuery.replica))

        let epoch = zone.epoch
        let position = try await PullStart.position(after: query.get(StrataQuery.after), zone: zone, storage: storage)

        var result = try await readPage(name, epoch: epoch, after: position, limit: limit)
        if result.transactions.isEmpty && wait > .zero {
            let clock = ContinuousClock()
            let deadline = clock.now + wait
            // A shutdown ends the wait at once: the poll is answered empty, with the same token.
            // So does the client going away (its connection closed: nobody reads the answer).
            var clientGone = false
            while result.transactions.isEmpty && !Task.isCancelled && !notifier.isShutDown && !clientGone {
                let remaining = deadline - clock.now
                guard remaining > .zero else { break }
                // Registered before looking, so that an append landing in between wakes us.
                let waiter = notifier.register(zone: name.description)
                let notifier = self.notifier
                let watching = ConnectionWatch.shared.onClose(context.connection) { notifier.cancel(waiter) }
                defer { ConnectionWatch.shared.forget(context.connection, watching) }
                do {
                    result = try await readPage(name, epoch: epoch, after: position, limit: limit)
                    if result.transactions.isEmpty {
                        let wake = await notifier.wait(waiter, timeout: signedInWait(remaining, context))
                        clientGone = wake == .cancelled
                        // A caller whose token expired during the wait (the wait ends with it)
                        // or was revoked (a reload wakes every wait) gets no further.
                        if wake == .notified || wake == .timedOut { try requireStillSignedIn(request, as: user) }
                        // Woken by a change (a grant, a deletion, an append): a caller who lost
                        // access meanwhile gets no further. (A timeout, a shutdown or a
                        // cancellation answers the empty page, which reveals nothing.)
                        if wake == .notified { try await requireStillReadable(name, by: user, epoch: epoch) }
                    }
                    notifier.remove(waiter)
                } catch {
                    notifier.remove(waiter)
                    throw error
                }
            }
        }
        // What was read may have been written after the request's access check (a long wait, or
        // storage calls slow under load): the caller must still be allowed to read it.
        if !result.transactions.isEmpty {
            try requireStillSignedIn(request, as: user)
            try await requireStillReadable(name, by: user, epoch: epoch)
        }

        // Masked off the request threads (decoding and encoding is CPU work), and only as much
        // of the page as can be sent: the page is cut below at the same byte budget.
        var maskCut: UInt64?
        if let mask {
            let page = result.transactions
            let budget = configuration.limits.maxPullBytes
            let masked: [ZoneEntry]
            do {
                masked = try await BlockingIO.run { try Self.masked(page, by: mask, except: puller, zone: name, within: budget) }
            } catch let error as ServerError {
                throw error
            } catch {
                throw ServerError(.internalError, "zone \(name): masking the pull failed: \(error)")
            }
            if masked.count < page.count { maskCut = page[masked.count].position }
            result.transactions = masked
        }
        var body: [UInt8] = []
        var answered = 0
        body.reserveCapacity(min(configuration.limits.maxPullBytes, result.transactions.reduce(0) { $0 + $1.bytes.count + 3 }))
        for (index, transaction) in result.transactions.enumerated() {
            // A page of large transactions ends early (never before its first one).
            if index > 0, body.count + transaction.bytes.count > configuration.limits.maxPullBytes {
                result.nextPosition = transaction.position
                result.moreComing = true
                break
            }
            TransactionFrames.append(transaction.bytes, to: &body)
            answered += 1
        }
        if let maskCut, answered == result.transactions.count {
            result.nextPosition = maskCut
            result.moreComing = true
        }
        metrics.pullTransactions.increment(by: Int64(answered))
        metrics.pullBytes.increment(by: Int64(body.count))
        var headers: HTTPFields = [.contentType: TransactionFrames.mediaType]
        headers[Self.nextTokenHeader] = try await PullStart.token(zone, at: result.nextPosition, storage: storage).description
        headers[Self.moreComingHeader] = result.moreComing ? "true" : "false"
        if let mask { headers[Self.omittedHeader] = mask.description }
        // Tells a long-polling client that the answer came early because the server is going away
        // (it may back off, or try another server), not because the zone changed or the wait ended.
        if notifier.isShutDown { headers[Self.shuttingDownHeader] = "true" }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    private func readPage(_ name: ZoneID, epoch: UInt64, after position: UInt64, limit: Int) async throws(ServerError) -> ReadResult {
        try await storageCall { () async throws(ZoneStorageError) in
            try await storage.read(zone: name, epoch: epoch, after: position, limit: limit)
        }
    }

    /// The `omit` parameter: the download mask (`nil` when absent or empty).
    func downloadMask(_ text: String?) throws(ServerError) -> DownloadMask? {
        guard let text, !text.isEmpty else { return nil }
        do {
            return try DownloadMask(parsing: text)
        } catch {
            throw ServerError(.badRequest, "omit: \((error as? StoreError)?.message ?? "\(error)")")
        }
    }

    /// The `replica` parameter of a pull: the pulling device's own replica.
    func pullingReplica(_ text: String?) throws(ServerError) -> ReplicaID? {
        guard let text else { return nil }
        guard let replica = ReplicaID(text) else {
            throw ServerError(.badRequest, "replica must be a replica ID (a UUID), got \"\(text.prefix(64))\"")
        }
        return replica
    }

    /// The transactions with what `mask` leaves out withheld — except those of `puller` (the
    /// device's own, which it may push back: they must come back as it wrote them) — as far as the
    /// first one that takes their bytes past `budget` (the page's cut, which always keeps one).
    static func masked(_ transactions: [ZoneEntry], by mask: DownloadMask, except puller: ReplicaID?, zone: ZoneID,
                       within budget: Int) throws(ServerError) -> [ZoneEntry] {
        var out: [ZoneEntry] = []
        var bytes = 0
        for var entry in transactions {
            do {
                let own = try puller.map { try TransactionHeader(decoding: entry.bytes).replica == $0 } ?? false
                if !own { entry.bytes = try TransactionMask.apply(mask, to: entry.bytes) }
            } catch {
                throw ServerError(.internalError, "zone \(zone): the transaction at position \(entry.position) does not decode (\(error)); it cannot be masked")
            }
            out.append(entry)
            bytes += entry.bytes.count
            if bytes > budget { break }
        }
        return out
    }

    /// The `limit` parameter: the default when absent, lowered to the maximum.
    private func pullLimit(_ text: String?) throws(ServerError) -> Int {
        guard let text else { return configuration.limits.defaultPullLimit }
        guard let value = Int(text), value > 0 else {
            throw ServerError(.badRequest, "limit must be a positive integer, got \"\(text.prefix(32))\"")
        }
        return min(value, configuration.limits.maxPullLimit)
    }

    /// The `wait` parameter in seconds: zero when absent, lowered to the maximum.
    private func pullWait(_ text: String?) throws(ServerError) -> Duration {
        guard let text else { return .zero }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else {
            throw ServerError(.badRequest, "wait must be a number of seconds, got \"\(text.prefix(32))\"")
        }
        return min(.nanoseconds(Int64(min(seconds, 1e9) * 1e9)), configuration.limits.maxWait)
    }

    static let nextTokenHeader = HTTPField.Name(StrataHeader.nextToken)!
    static let moreComingHeader = HTTPField.Name(StrataHeader.moreComing)!
    static let shuttingDownHeader = HTTPField.Name(StrataHeader.shuttingDown)!
    static let omittedHeader = HTTPField.Name(StrataHeader.omitted)!

    /// `GET /v1/zones/{zone}/snapshot`: the zone's state as a projection snapshot (for clients whose
    /// token has expired), with the change token it corresponds to in `Strata-Snapshot-Token`.
    func snapshot(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let name = zone.id
        let mask = try downloadMask(request.uri.queryParameters.get(StrataQuery.omit))
        guard let snapshot = try await storageCall({ () async throws(ZoneStorageError) in try await storage.snapshot(zone: name) }) else {
            throw ServerError(.notFound, "zone \(name) has no snapshot: pull from the beginning")
        }
        // The snapshot may hold what was written after the request's access check.
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(name, by: user, epoch: zone.epoch)
        var headers = HTTPFields()
        headers[.contentType] = StrataMediaType.snapshot
        headers[HTTPField.Name(StrataHeader.snapshotToken)!] = try await PullStart.token(zone, at: snapshot.position, storage: storage).description
        if let mask { headers[Self.omittedHeader] = mask.description }
        var payload = snapshot.payload
        if let mask {
            do {
                let stored = payload
                // Off the request threads: a snapshot that holds masked names is decoded whole.
                payload = try await BlockingIO.run { try TransactionMask.apply(mask, toSnapshot: stored) }
            } catch {
                throw ServerError(.internalError, "zone \(name): its snapshot at position \(snapshot.position) does not decode (\(error)); it cannot be masked")
            }
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: payload)))
    }
}

extension StrataServerApp {
    static let schemaVersionHeader = HTTPField.Name(StrataHeader.schemaVersion)!

    /// Refuses a client whose app schema is older than the zone supports (`426 schemaTooOld`,
    /// after the access checks, so that a stranger learns nothing of the zone): its pushes,
    /// pulls, snapshots and states. A client that does not say its version runs version 1. The
    /// zone's description stays readable, so that an old client can show why it stopped.
    static func requireSchemaVersion(_ request: Request, _ zone: ZoneInfo) throws(ServerError) {
        var version = 1
        if let text = request.headers[schemaVersionHeader] {
            guard let parsed = Int(text), (1...maxSchemaVersion).contains(parsed) else {
                throw ServerError(.badRequest, "\(StrataHeader.schemaVersion) \"\(text.prefix(32))\" is not a schema version (1 to \(maxSchemaVersion))")
            }
            version = parsed
        }
        guard version >= zone.minSchemaVersion else {
            var refusal = ServerError(.schemaTooOld, "zone \(zone.id) syncs with app schema version \(zone.minSchemaVersion) and later; this app runs version \(version): update the app (its edits stay on the device)")
            refusal.minSchemaVersion = zone.minSchemaVersion
            throw refusal
        }
    }
}
