import Strata
@testable import StrataSync
import StrataProtocol
import Testing
import StrataCore

/// The engine's decisions as tables: for each request the engine sends, every protocol code
/// (`ErrorCode.all`, so a code added to the protocol without a row here fails) and every
/// failure of the transport, with the action the engine takes next.
@Suite("The sync engine's decisions, code by code")
struct SyncStateMachineTests {
    /// What an action is, without the message of the error it stops with.
    enum Expected: Hashable {
        case retry
        /// Stops with the refusal's own code.
        case stop
        /// Stops with another code.
        case stopWith(String)
        case resumePush(UInt64)
        case splitBatch(Int)
        case fork(keepingThrough: UInt64, reason: ReplicaFork.Reason, restamp: Bool)
        case holdPushes, bootstrapFromSnapshot, startOver, rewind, uploadWithoutClaim, propagate
    }

    static let zone = ZoneReference("notes")
    static let policy = SyncStateMachine.Policy(maxRetries: 3, initialBackoff: .seconds(1), maxBackoff: .seconds(8),
                                                unauthorizedBackoff: .seconds(2), maxUnauthorizedBackoff: .seconds(64))
    let machine = SyncStateMachine(zone: Self.zone, policy: Self.policy)
    /// The device's clock agrees with the server's (`serverTime` below).
    static let now: UInt64 = 1_800_000_000_000
    let environment = SyncStateMachine.Environment(now: Self.now, jitter: 1)

    static let replica = ReplicaID(rawValue: 0xAB)
    static let push = SyncStateMachine.PushProgress(batchSize: 8, firstSequences: 11...12, replica: replica, acknowledged: 10)

    /// A refusal with `code` as a server answers it: its status, and the fields the code carries.
    static func refusal(_ code: ErrorCode) -> SyncError {
        SyncError(code, "refused", status: code.status, expectedSequence: code == .sequenceGap ? 5 : nil,
                  retryAfter: nil, sequence: code == .replicaForked || code == .clockSkew ? 8 : nil,
                  serverTime: code == .clockSkew ? now : nil, maxOffset: code == .clockSkew ? 60_000 : nil)
    }

    func kind(_ action: SyncStateMachine.Action, refusal: SyncError) -> Expected? {
        switch action {
        case .retry: return .retry
        case .stop(let error): return error.code == refusal.code ? .stop : .stopWith(error.code.name)
        case .resumePush(let expected): return .resumePush(expected)
        case .splitBatch(let count): return .splitBatch(count)
        case .fork(let kept, let reason, let restamp): return .fork(keepingThrough: kept, reason: reason, restamp: restamp)
        case .holdPushes: return .holdPushes
        case .bootstrapFromSnapshot: return .bootstrapFromSnapshot
        case .startOver: return .startOver
        case .rewind: return .rewind
        case .uploadWithoutClaim: return .uploadWithoutClaim
        case .propagate: return .propagate
        case .proceed, .pushNext, .pullNext, .done, .pullMerged, .pushAgainAndHeal: return nil
        }
    }

    /// Overload and server failures are retried whatever was asked.
    static let transient: [ErrorCode: Expected] = [.rateLimited: .retry, .internalError: .retry, .serverBusy: .retry, .storageFull: .retry]

    /// Every code not named in `rows` stops the step with that code.
    static func table(_ rows: [ErrorCode: Expected]) -> [ErrorCode: Expected] {
        var table = transient.merging(rows) { $1 }
        for code in ErrorCode.all where table[code] == nil { table[code] = .stop }
        return table
    }

    /// Each request with its table. The rows say what differs from "stop with the refusal".
    static let tables: [(String, SyncStateMachine.Request, [ErrorCode: Expected])] = [
        ("a push", .push(push), table([
            .forbidden: .holdPushes,
            .replicaNotYours: .fork(keepingThrough: 10, reason: .forked, restamp: false),
            .sequenceGap: .resumePush(5),
            .replicaForked: .fork(keepingThrough: 7, reason: .forked, restamp: false),
            .tooLarge: .splitBatch(4),
            .clockSkew: .fork(keepingThrough: 10, reason: .clockRestamp, restamp: true),
            .zoneReset: .startOver,
        ])),
        ("a pull after a token", .pull(fromToken: true), table([
            .tokenExpired: .bootstrapFromSnapshot, .zoneReset: .startOver, .zoneRewound: .rewind,
        ])),
        ("a pull from the start", .pull(fromToken: false), table([
            .tokenExpired: .bootstrapFromSnapshot, .zoneReset: .startOver,
        ])),
        ("a known zone looked up", .ensureZone(create: false, ownZone: true, knownZone: true), table([
            .zoneNotFound: .stopWith("zoneDeleted"),
        ])),
        ("another user's zone looked up for the first time", .ensureZone(create: false, ownZone: false, knownZone: false), table([:])),
        ("the caller's own zone created", .ensureZone(create: true, ownZone: true, knownZone: false), table([:])),
        ("a state upload with a claim", .stateUpload(claimed: true), table([
            .forbidden: .holdPushes, .replicaNotYours: .uploadWithoutClaim,
        ])),
        ("a state upload without a claim", .stateUpload(claimed: false), table([.forbidden: .holdPushes])),
        ("a snapshot", .snapshot(reason: refusal(.tokenExpired)), table([:])),
        ("the zone's replicas", .replicas, table([:])),
    ]

    @Test("every protocol code, answered to every request the engine sends, leads to the action its table states")
    func everyCodeHasItsAction() {
        for (name, request, table) in Self.tables {
            #expect(table.count == ErrorCode.all.count, "\(name): a code without a row")
            for code in ErrorCode.all {
                let refusal = Self.refusal(code)
                let action = machine.next(after: .init(request), answered: .refused(refusal), environment: environment)
                #expect(kind(action, refusal: refusal) == table[code], "\(name) refused with \(code): \(action)")
            }
        }
    }

    @Test("the transport's failures: a network failure is retried, an untrusted server, a malformed answer, the store and a code this client does not know stop at once, a cancellation propagates — for every request")
    func transportFailures() {
        let failures: [(SyncError, Expected)] = [
            (SyncError(.transport, "connection refused"), .retry),
            (SyncError(.transport, "unexpected answer 502", status: 502), .retry),
            (SyncError(.untrustedServer, "the TLS handshake failed"), .stop),
            (SyncError(.malformedResponse, "push answer is not {token, acknowledged}"), .stop),
            (SyncError(.store, "the store refused pulled transactions"), .stop),
            (SyncError(SyncError.Code("aCodeOfANewerServer"), "refused", status: 409), .stop),
        ]
        for (name, request, _) in Self.tables {
            for (failure, expected) in failures {
                let action = machine.next(after: .init(request), answered: .refused(failure), environment: environment)
                #expect(kind(action, refusal: failure) == expected, "\(name) failing with \(failure): \(action)")
            }
            let cancelled = machine.next(after: .init(request), answered: .failed(CancellationError()), environment: environment)
            #expect(cancelled == .propagate, "\(name) cancelled: \(cancelled)")
        }
    }

    @Test("a transient failure is retried with a doubling, capped backoff until the retries run out, then stops with it")
    func retriesRunOut() {
        let failure = SyncError(.transport, "down")
        var delays: [Duration] = []
        for attempt in 0...Self.policy.maxRetries {
            let action = machine.next(after: .init(.pull(fromToken: true), attempt: attempt), answered: .refused(failure), environment: environment)
            switch action {
            case .retry(let delay): delays.append(delay)
            case .stop(let error): #expect(error == failure && attempt == Self.policy.maxRetries, "stopped at attempt \(attempt)")
            default: Issue.record("attempt \(attempt): \(action)")
            }
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
        let capped = machine.next(after: .init(.replicas, attempt: 2), answered: .refused(failure),
                                  environment: .init(now: 0, jitter: 0.5))
        #expect(capped == .retry(after: .seconds(2)), "half of the capped 4 s at the lowest jitter")
    }

    @Test("a server's Retry-After replaces the backoff, never below the initial one; one that is not a number of seconds (nan, negative) is ignored, one past an hour is capped")
    func retryAfter() {
        func delay(_ retryAfter: Double) -> SyncStateMachine.Action {
            machine.next(after: .init(.push(Self.push)), answered: .refused(SyncError(.rateLimited, "slow down", status: 429, retryAfter: retryAfter)),
                         environment: environment)
        }
        #expect(delay(7) == .retry(after: .seconds(7)))
        // Retry-After: 0 (or a fraction below the initial backoff) waits the initial backoff: no spin.
        #expect(delay(0) == .retry(after: .seconds(1)))
        #expect(delay(.nan) == .retry(after: .seconds(1)))
        #expect(delay(-3) == .retry(after: .seconds(1)))
        #expect(delay(.infinity) == .retry(after: .seconds(1)))
        #expect(delay(1e300) == .retry(after: .seconds(3600)))
    }

    @Test("a push's refusals depend on what it did already: a lone transaction too large, a fourth fork, a second re-stamp, a clock still ahead, a gap or fork without its field")
    func pushRefusalsInContext() {
        func next(_ push: SyncStateMachine.PushProgress, _ error: SyncError, now: UInt64 = Self.now) -> SyncStateMachine.Action {
            machine.next(after: .init(.push(push)), answered: .refused(error), environment: .init(now: now, jitter: 1))
        }
        var lone = Self.push
        lone.batchSize = 1
        guard case .stop(let tooLarge) = next(lone, Self.refusal(.tooLarge)) else { Issue.record("a lone transaction too large was not refused"); return }
        #expect(tooLarge.code == .tooLarge && tooLarge.message.contains("11...12") && tooLarge.message.contains("\(Self.replica)"), "\(tooLarge)")

        var forked = Self.push
        forked.forks = 3
        #expect(next(forked, Self.refusal(.replicaForked)) == .stop(Self.refusal(.replicaForked)), "a confused server loops the store")
        #expect(next(forked, Self.refusal(.replicaNotYours)) == .stop(Self.refusal(.replicaNotYours)))

        var restamped = Self.push
        restamped.restamped = true
        #expect(next(restamped, Self.refusal(.clockSkew)) == .stop(Self.refusal(.clockSkew)))
        // The device is still 40 s ahead of the server, which accepts 60 s: re-stamping would
        // stamp them ahead again, so the edits wait.
        #expect(next(Self.push, Self.refusal(.clockSkew), now: Self.now + 40_000) == .stop(Self.refusal(.clockSkew)))
        #expect(next(Self.push, Self.refusal(.clockSkew), now: Self.now - 30_000)
                == .fork(keepingThrough: 10, reason: .clockRestamp, restamp: true), "a device behind by half the offset re-stamps")
        #expect(next(Self.push, SyncError(.clockSkew, "ahead", status: 422)) == .stop(SyncError(.clockSkew, "ahead", status: 422)))

        #expect(next(Self.push, SyncError(.sequenceGap, "gap", status: 409)) == .stop(SyncError(.sequenceGap, "gap", status: 409)))
        #expect(next(Self.push, SyncError(.sequenceGap, "gap", status: 409, expectedSequence: 0))
                == .stop(SyncError(.sequenceGap, "gap", status: 409, expectedSequence: 0)))
        // A server naming sequence 0 (none has it) makes the store keep nothing, not wrap around.
        #expect(next(Self.push, SyncError(.replicaForked, "differs", status: 409, sequence: 0))
                == .fork(keepingThrough: 0, reason: .forked, restamp: false))
        #expect(next(Self.push, SyncError(.replicaForked, "differs", status: 409)) == .fork(keepingThrough: 0, reason: .forked, restamp: false))
    }

    @Test("a zone that is gone is told apart: the caller's own zone deleted on the server, another user's zone deleted by its owner, a zone never seen")
    func missingZones() {
        func stop(_ request: SyncStateMachine.Request) -> SyncError? {
            guard case .stop(let error) = machine.next(after: .init(request), answered: .refused(Self.refusal(.zoneNotFound)), environment: environment)
            else { return nil }
            return error
        }
        let own = stop(.ensureZone(create: false, ownZone: true, knownZone: true))
        #expect(own?.code == .zoneDeleted && own?.message.contains("recreateZone") == true, "\(String(describing: own))")
        let others = stop(.ensureZone(create: false, ownZone: false, knownZone: true))
        #expect(others?.code == .zoneDeleted && others?.message.contains("by its owner") == true, "\(String(describing: others))")
        #expect(stop(.ensureZone(create: false, ownZone: false, knownZone: false))?.code == .zoneNotFound)
        #expect(stop(.ensureZone(create: true, ownZone: true, knownZone: false))?.code == .zoneNotFound)
        #expect(stop(.ensureZone(create: true, ownZone: true, knownZone: true))?.code == .zoneDeleted,
                "recreating a zone the server still refuses to make is not silently a new zone")
    }

    @Test("answers go on as their payload says: more to push or pull, a snapshot missing after an expired token, a merged state not yet held")
    func successes() {
        func next(_ request: SyncStateMachine.Request, _ answer: SyncStateMachine.Answer) -> SyncStateMachine.Action {
            machine.next(after: .init(request), answered: answer, environment: environment)
        }
        #expect(next(.push(Self.push), .pushed(remaining: 3)) == .pushNext)
        #expect(next(.push(Self.push), .pushed(remaining: 0)) == .done)
        #expect(next(.pull(fromToken: true), .pulled(moreComing: true)) == .pullNext)
        #expect(next(.pull(fromToken: true), .pulled(moreComing: false)) == .done)
        #expect(next(.stateUpload(claimed: true), .stateUploaded(upToDate: true)) == .done)
        #expect(next(.stateUpload(claimed: true), .stateUploaded(upToDate: false)) == .pullMerged)
        #expect(next(.ensureZone(create: true, ownZone: true, knownZone: false), .zone(canPush: false)) == .proceed)
        #expect(next(.replicas, .replicas) == .proceed)
        let expired = SyncError(.tokenExpired, "compacted", status: 410)
        #expect(next(.snapshot(reason: expired), .snapshot(found: true)) == .proceed)
        guard case .stop(let error) = next(.snapshot(reason: expired), .snapshot(found: false)) else {
            Issue.record("an expired token without a snapshot went on"); return
        }
        #expect(error.code == .tokenExpired && error.status == 410 && error.message.contains("serves no snapshot"), "\(error)")
    }

    @Test("a refusal for the device's clock (or a remove of an add the zone does not hold yet, or an asset the zone lacks) waits while the pull goes on — always for a heal, for a push in a sync asked for once, and for an asset refusal in continuous mode too; anything else fails the sync")
    func deferrals() {
        for code in ErrorCode.all {
            let refusal = Self.refusal(code)
            let waits = code == .clockSkew || code == .unheldAdd || code == .assetMissing || code == .assetMismatch
            let deferred: SyncStateMachine.StageAction = waits ? .deferError : .fail
            #expect(machine.next(after: .heal, failed: refusal) == deferred, "heal, \(code)")
            #expect(machine.next(after: .push(continuous: false), failed: refusal) == deferred, "push, \(code)")
            let assetRefusal = code == .assetMissing || code == .assetMismatch
            #expect(machine.next(after: .push(continuous: true), failed: refusal) == (assetRefusal ? .deferError : .fail), "continuous push, \(code)")
        }
        #expect(machine.next(after: .heal, failed: SyncError(.transport, "down")) == .fail)
        #expect(machine.status(afterSyncFailing: nil) == (.idle, nil))
        let refused = SyncError(.unauthorized, "revoked", status: 401)
        #expect(machine.status(afterSyncFailing: refused) == (.unauthorized, refused))
        let down = SyncError(.transport, "down")
        #expect(machine.status(afterSyncFailing: down) == (.idle, down))
        let tooOld = SyncError(.schemaTooOld, "update", status: 426)
        #expect(machine.status(afterSyncFailing: tooOld) == (.updateRequired, tooOld))
    }

    @Test("continuous mode after every code: refused credentials back off on their own doubling schedule in phase unauthorized, an app too old for the zone in phase updateRequired, any other refusal backs off in phase backingOff, an answered round resets both")
    func continuousRounds() {
        for code in ErrorCode.all {
            var loop = SyncStateMachine.LoopState(knowsLimits: true)
            let refusal = Self.refusal(code)
            let action = machine.next(after: .refused(refusal), loop: &loop, cancelled: false, environment: environment)
            let expected: SyncStateMachine.LoopAction = code == .unauthorized
                ? .backOff(.seconds(2), phase: .unauthorized, lastError: refusal)
                : code == .schemaTooOld
                ? .backOff(.seconds(2), phase: .updateRequired, lastError: refusal)
                : .backOff(.seconds(1), phase: .backingOff, lastError: refusal)
            #expect(action == expected, "\(code): \(action)")
            #expect(machine.refreshesAccess(loop), "\(code): the next round asks for the caller's rights again")
        }
        var loop = SyncStateMachine.LoopState(knowsLimits: true)
        let revoked = Self.refusal(.unauthorized)
        var waits: [Duration] = []
        for _ in 0..<7 {
            if case .backOff(let delay, _, _) = machine.next(after: .refused(revoked), loop: &loop, cancelled: false, environment: environment) {
                waits.append(delay)
            }
        }
        #expect(waits == [2, 4, 8, 16, 32, 64, 64].map { .seconds($0) })
        #expect(loop.failures == 7 && loop.refusals == 7)
        #expect(machine.next(after: .answered, loop: &loop, cancelled: false, environment: environment) == .nextRound)
        #expect(loop.failures == 0 && loop.refusals == 0 && !machine.refreshesAccess(loop))
        #expect(machine.next(after: .failed(CancellationError()), loop: &loop, cancelled: false, environment: environment)
                == .backOff(.seconds(1), phase: nil, lastError: nil), "a foreign error backs off without a status")
        #expect(machine.next(after: .refused(revoked), loop: &loop, cancelled: true, environment: environment) == .stop)
        #expect(machine.refreshesAccess(SyncStateMachine.LoopState()), "the first round asks for the caller's rights")
    }

    @Test("a SyncError's code is the protocol's ErrorCode: compared and switched over directly, and a name a server answered comes back as its ErrorCode")
    func codesAreTheProtocols() {
        for code in ErrorCode.all {
            let error = SyncError(code, "refused", status: code.status)
            #expect(error.code == code && error.code.protocolCode == code && !(error.code != code))
            #expect(SyncError.Code(code.name).protocolCode == code, "what a transport decodes from a body's code")
            let optional: SyncError.Code? = error.code
            #expect(optional == code)
        }
        #expect(SyncError.Code.transport.protocolCode == nil && SyncError.Code.zoneDeleted.protocolCode == nil)
        let none: SyncError.Code? = nil
        #expect(!(none == ErrorCode.unauthorized) && none != ErrorCode.unauthorized)
        switch SyncError(.clockSkew, "ahead").code {
        case ErrorCode.tokenExpired: Issue.record("matched another code")
        case ErrorCode.clockSkew: break
        default: Issue.record("a protocol code did not match in a switch")
        }
    }

    @Test("before a request: a push no pull confirmed is checked against the server's count, a heal waits for write access and pulls first without a token, a bootstrap with a heal due leaves the push to the heal")
    func beforeRequests() {
        typealias Facts = SyncStateMachine.CursorFacts
        #expect(machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, hasToken: true, pushUnconfirmed: true)))
        #expect(machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, hasToken: false)))
        #expect(!machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, hasToken: true, pushUnconfirmed: false)), "a confirmed push is not asked about")
        #expect(!machine.verifiesAcknowledgedPush(Facts(acknowledged: 0, hasToken: false)), "nothing acknowledged, nothing to lose")
        #expect(!machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, countsStoreReplica: false, hasToken: false)), "a cursor of a replica forked away from")
        #expect(machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, hasToken: true, verified: false)), "a cursor read from disk is checked once")
        #expect(!machine.verifiesAcknowledgedPush(Facts(acknowledged: 5, hasToken: true, healPending: true, verified: false)), "a pending heal says how far the replica goes itself")
        #expect(!machine.verifiesAcknowledgedPush(Facts(acknowledged: 0, hasToken: true, verified: false)), "nothing acknowledged, nothing held back")
        #expect(machine.next(afterServerHolds: 3, of: Facts(acknowledged: 5)) == .pushAgainAndHeal)
        #expect(machine.next(afterServerHolds: 5, of: Facts(acknowledged: 5)) == .proceed)
        #expect(machine.heals(Facts(healPending: true, canPush: true)))
        #expect(!machine.heals(Facts(healPending: true, canPush: false)), "a reader keeps the heal pending")
        #expect(!machine.heals(Facts(healPending: false, canPush: true)))
        #expect(machine.healPullsFirst(Facts(hasToken: false)) && !machine.healPullsFirst(Facts(hasToken: true)))
        #expect(machine.pushesAfterBootstrap(Facts(healPending: false)) && !machine.pushesAfterBootstrap(Facts(healPending: true)))
    }
}
