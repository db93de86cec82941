import Foundation
import Hummingbird

/// Serves `router` on a free loopback port for as long as `body` runs, with the server's URL:
/// a live Hummingbird server answering however a test needs (slowly, without end, too much).
func withRouterServer(_ router: Router<BasicRequestContext>, _ body: (URL) async throws -> Void) async throws {
    let (ports, announce) = AsyncStream.makeStream(of: Int.self)
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { channel in announce.yield(channel.localAddress?.port ?? 0) })
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.runService() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0, let url = URL(string: "http://127.0.0.1:\(port)") else {
            throw CancellationError()
        }
        defer { group.cancelAll() }
        try await body(url)
    }
}
