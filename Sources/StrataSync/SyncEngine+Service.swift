public import ServiceLifecycle

/// A sync engine is a swift-service-lifecycle service: in a `ServiceGroup` beside an app's (or a
/// server's) other services it syncs continuously (``SyncEngine/start()``) until the group shuts
/// down gracefully, then stops — the long poll ended, nothing half-applied — before the group
/// moves on.
///
/// ```swift
/// let group = ServiceGroup(configuration: .init(services: [.init(service: engine)], logger: logger))
/// try await group.run()
/// ```
extension SyncEngine: Service {
    public func run() async throws {
        start()
        // Cancelled instead of shut down gracefully: stop all the same.
        try? await gracefulShutdown()
        await stop()
    }
}
