import ServiceLifecycle

/// The first service of `strata serve` to hear the shutdown signal (the group shuts its services
/// down in reverse order, and this one is last): it calls ``StrataServerApp/beginShutdown()``, so
/// that every long poll is answered at once and `/ready` answers `503` before the HTTP server stops
/// accepting connections and waits for the requests in flight.
struct ShutdownAnnouncer: Service {
    let server: StrataServerApp

    func run() async throws {
        // Cancellation (the group failing) ends the wait too: the long polls must end either way.
        try? await gracefulShutdown()
        server.beginShutdown()
    }
}
