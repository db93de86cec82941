import Logging
import ServiceLifecycle

/// Wakes this process's long polls for changes other processes made to a shared storage (see
/// ``ZoneStorage/changesByOthers()``): the wake-ups of several `strata serve` instances on one
/// database. Over a storage of one process it has nothing to follow and waits for the shutdown.
struct ChangeFeedService: Service {
    let server: StrataServerApp

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await server.followChangesByOthers()
            // Nothing (more) to follow: stay until the shutdown cancels this, since a service
            // that ends takes the group down.
            while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        }
    }
}
