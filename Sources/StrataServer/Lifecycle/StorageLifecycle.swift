public import ServiceLifecycle

extension ZoneStorage {
    /// Runs a storage of one process: there is nothing to run in the background, so it waits
    /// for the graceful shutdown (or cancellation) and then closes the storage, making
    /// everything durable. `strata serve` runs its storage as the first service of its group,
    /// so that it closes last.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        }
        try await close()
    }

    /// Runs the storage (``run()``) for as long as `body` takes, then closes it and waits for
    /// the run to end: for a tool or a test that uses a storage outside a server.
    ///
    /// ```swift
    /// let zones = try await storage.withRunning { storage in try await storage.zones() }
    /// ```
    ///
    /// - Throws: what `body` throws; else the error that ended the run (a database that could
    ///   not be opened), or the close's.
    public func withRunning<T: Sendable>(_ body: @Sendable (Self) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try await body(self))
            } catch {
                outcome = .failure(error)
            }
            // Ends the run: a storage of one process closes when cancelled, a shared one when closed.
            try? await close()
            group.cancelAll()
            var ended: (any Error)?
            while true {
                do {
                    guard try await group.next() != nil else { break }
                } catch {
                    if !(error is CancellationError) { ended = ended ?? error }
                }
            }
            let value = try outcome.get()
            if let ended { throw ended }
            return value
        }
    }
}

/// Helpers for the `run()` of a ``ZoneStorage`` in another module (it need not import
/// ServiceLifecycle).
public enum StorageLifecycle {
    /// Returns when the graceful shutdown reaches the calling service, when the calling task is
    /// cancelled, or when `finished` finishes (the storage was closed).
    public static func untilShutdown(orFinished finished: AsyncStream<Void>) async {
        await cancelWhenGracefulShutdown {
            for await _ in finished {}
        }
    }
}
