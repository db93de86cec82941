import Logging
import ServiceLifecycle

/// The storage of `strata serve` as a service: it holds the storage open while the others run and
/// closes it when the shutdown reaches it — last, since it is the first service of the group —
/// so that every acknowledged push is durable when the process exits.
struct StorageService: Service {
    let storage: any ZoneStorage
    let logger: Logger

    func run() async throws {
        // Cancellation (a failure elsewhere) closes the storage too.
        try? await gracefulShutdown()
        do {
            try await storage.close()
            logger.debug("storage closed")
        } catch {
            logger.error("closing the storage failed", metadata: ["error": "\(error)"])
            throw error
        }
    }
}
