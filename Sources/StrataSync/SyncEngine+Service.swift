public import ServiceLifecycle

/// A sync engine is a swift-service-lifecycle service: in a `ServiceGroup` beside an app's (or a
/// server's) other services it syncs continuously until the group shuts down gracefully, then
/// stops — the long poll ended, nothing half-applied — before the group moves on.
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(services: [.init(service: engine)], logger: logger))
/// try await group.run()
/// ```
extension SyncEngine: Service {
    /// Syncs continuously in the caller's task until a graceful shutdown, a cancellation or
    /// ``stop()``: continuous mode's parts are child tasks of one task group, so none outlives it.
    /// When continuous mode already runs (``start()``), waits for the shutdown and stops it.
    public func run() async throws {
        guard let stops = beginSession() else {
            try? await gracefulShutdown()
            await stop()
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.syncContinuously(until: stops) }
            group.addTask {
                // Cancelled instead of shut down gracefully: stop all the same.
                try? await gracefulShutdown()
                await self.stop()
            }
            // Continuous mode ended (``stop()``, a cancellation) or the shutdown stopped it:
            // the other child is not needed any more.
            _ = await group.next()
            group.cancelAll()
        }
        update { $0.phase = .stopped }
    }
}
