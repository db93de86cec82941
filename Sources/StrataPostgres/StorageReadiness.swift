import StrataServer
import Synchronization

/// Whether a storage's ``PostgresZoneStorage/run()`` has made it ready (the database reached, the
/// schema migrated), or why it could not: calls wait for it, so that none runs against a schema
/// not yet migrated, and a storage that could not open fails each call with the reason.
final class StorageReadiness: Sendable {
    private let result = Mutex<Result<Void, ZoneStorageError>?>(nil)
    /// Whether ``PostgresZoneStorage/run()`` has begun opening: then a wait lasts until it
    /// settles (run() bounds reaching the database by its connect timeout), however loaded the
    /// machine — a deadline there failed calls while a slow migration was still progressing.
    private let started = Atomic<Bool>(false)

    /// run() has begun opening the storage.
    func markStarted() { started.store(true, ordering: .releasing) }

    /// Settles the outcome; the first one settled stays.
    func resolve(_ outcome: Result<Void, any Error>) {
        result.withLock { result in
            guard result == nil else { return }
            switch outcome {
            case .success: result = .success(())
            case .failure(let error as ZoneStorageError): result = .failure(error)
            case .failure(let error): result = .failure(ZoneStorageError(.storageFailure, "the PostgreSQL storage did not open: \(error)"))
            }
        }
    }

    /// Waits until the outcome is settled: at most `timeout` while nobody runs the storage, until
    /// it settles once run() has begun.
    ///
    /// Polls while it is not: only the calls made while the storage starts ever wait, and a poll
    /// answers cancellation at once, which a continuation would not.
    func wait(atMost timeout: Duration, url: PostgresConnectionURL) async throws(ZoneStorageError) {
        let deadline = ContinuousClock.now + timeout
        while true {
            switch result.withLock({ $0 }) {
            case .success: return
            case .failure(let error): throw error
            case nil: break
            }
            guard started.load(ordering: .acquiring) || ContinuousClock.now < deadline, !Task.isCancelled else {
                throw ZoneStorageError(.storageUnavailable, "the PostgreSQL storage at \(url) is not running or not open yet (within \(timeout)): run it (PostgresZoneStorage.run())")
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}
