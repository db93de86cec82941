@_spi(StrataInternals) import Strata
import StrataCore
import Logging
import StrataProtocol

/// How the engine sends a request: it performs what the ``SyncStateMachine`` decides about the
/// answer — a retry after a backoff, a typed stop, or a step for the caller to take — and decides
/// nothing itself.
extension SyncEngine {
    /// A request's outcome for the code that sent it.
    enum Reply<Value: Sendable>: Sendable {
        /// The server answered.
        case answered(Value)
        /// The server refused, and the machine says what to do instead (neither a retry nor a
        /// stop: those the engine performed already).
        case redirected(SyncStateMachine.Action, refusal: SyncError)
    }

    /// What the cursor and the server's last word say now, for the machine.
    var cursorFacts: SyncStateMachine.CursorFacts {
        SyncStateMachine.CursorFacts(acknowledged: cursor.acknowledged, countsStoreReplica: cursor.replica == store.replicaID,
                                     hasToken: cursor.token != nil, pushUnconfirmed: cursor.pushUnconfirmed,
                                     healPending: cursor.healPending, canPush: canPush, verified: cursorVerified)
    }

    /// What the machine reads from outside now: the wall clock and a jitter.
    func environment() -> SyncStateMachine.Environment {
        SyncStateMachine.Environment(now: options.wallClock(), jitter: options.jitter())
    }

    /// The machine's next action after `request` was answered with `answer`.
    func next(after request: SyncStateMachine.Request, answered answer: SyncStateMachine.Answer) -> SyncStateMachine.Action {
        machine.next(after: SyncStateMachine.Asked(request), answered: answer, environment: environment())
    }

    /// Sends `request` through `body` until it is answered or the machine says otherwise: a retry
    /// waits on ``SyncOptions/clock`` (status ``SyncStatus/Phase/backingOff``) and sends it
    /// again, a stop throws its typed error, anything else goes back to the caller to perform.
    /// Under a time budget (`syncOnce(deadline:)`) no request starts or waits past the deadline
    /// (see ``SyncBudget``).
    func ask<Value: Sendable>(_ request: SyncStateMachine.Request, _ body: @escaping @Sendable () async throws -> Value) async throws -> Reply<Value> {
        var attempt = 0
        while true {
            let answer: SyncStateMachine.Answer
            let thrown: any Error
            do {
                return .answered(try await SyncBudget.bounding(body))
            } catch let spent as SyncBudget.Spent {
                throw spent
            } catch let error as SyncError {
                if error.code == .assetMissing { zoneLacksAssets(error) }
                answer = .refused(error)
                thrown = error
            } catch {
                answer = .failed(error)
                thrown = error
            }
            let action = machine.next(after: SyncStateMachine.Asked(request, attempt: attempt), answered: answer, environment: environment())
            switch action {
            case .retry(let delay):
                attempt += 1
                let refusal = thrown as? SyncError
                options.logger.debug("retrying", metadata: ["error": "\(thrown)", "attempt": "\(attempt)"])
                // A backoff that would outlast the budget ends the sync now, as the deadline would.
                if SyncBudget.cannotWait(delay) { throw SyncBudget.Spent() }
                update { $0.phase = .backingOff; $0.lastError = refusal ?? $0.lastError }
                try await options.clock.sleep(for: delay)
            case .stop(let error):
                throw error
            case .propagate:
                throw thrown
            default:
                // Only a refusal is redirected: what the transport threw otherwise propagates.
                guard let refusal = thrown as? SyncError else { throw thrown }
                return .redirected(action, refusal: refusal)
            }
        }
    }

    /// The server says the zone lacks assets (`assetMissing`): whatever this engine believed
    /// uploaded among them is forgotten, so the next push or state upload sends them again, and
    /// the device's copies stop counting as held by a server — eviction under the cache budget
    /// must not drop what may now be the last copy. A refusal that names none forgets all.
    func zoneLacksAssets(_ refusal: SyncError) {
        guard let listed = refusal.assets else {
            assetsInZone.removeAll()
            return
        }
        for hash in listed {
            assetsInZone.remove(hash)
            store.markAssetNotUploaded(hash)
        }
    }
}
