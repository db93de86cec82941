import Foundation
import Logging
import StrataServer
import Testing

/// Runs `body` with a log server listening on a free port of 127.0.0.1 (embedded storage in
/// `directory`, the users `users`), then stops it and closes the storage — whether `body`
/// returns or throws. The CLI suites' servers (each names its users).
func withLogServer(_ directory: String, users: UserDirectory, _ body: (URL, EmbeddedZoneStorage) async throws -> Void) async throws {
    var logger = Logger(label: "strata.test.server")
    logger.logLevel = .critical
    let storage = try EmbeddedZoneStorage(directory: directory, logger: logger)
    let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(host: "127.0.0.1", port: 0), logger: logger)
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let serving = Task { try await app.run(onRunning: { port in portContinuation.yield(port) }) }
    var iterator = ports.makeAsyncIterator()
    let outcome: Result<Void, any Error>
    do {
        let port = try #require(await iterator.next())
        try await body(try #require(URL(string: "http://127.0.0.1:\(port)")), storage)
        outcome = .success(())
    } catch {
        outcome = .failure(error)
    }
    serving.cancel()
    _ = await serving.result
    // A storage that does not close cleanly fails a test that otherwise passed.
    if case .success = outcome { try await storage.close() } else { try? await storage.close() }
    try outcome.get()
}
