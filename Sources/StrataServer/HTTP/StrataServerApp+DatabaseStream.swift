import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StrataProtocol

extension StrataServerApp {
    /// `GET /v1/database/stream?after=&limit=`: the caller's database changes (as
    /// `GET /v1/database/changes` answers them) as Server-Sent Events, for a client that holds one
    /// connection rather than long polls:
    ///
    /// ```text
    /// id: <database token>
    /// event: changes
    /// data: {"token": "...", "zones": [...], "removed": [...], ...}
    ///
    /// : heartbeat
    /// ```
    ///
    /// Each `changes` event is one page; its `id` is its token, so a client that reconnects with
    /// `Last-Event-ID` (or `after`) goes on from it. Without either, the first event is a full
    /// listing. A comment is sent every ``ServerConfiguration/Limits/streamHeartbeat`` with nothing
    /// to say. The stream ends — the client opens another — after
    /// ``ServerConfiguration/Limits/maxStreamDuration``, when the caller's JWT expires, at shutdown,
    /// and, after an `error` event (`data:` the error body an answer would have), when the caller is no
    /// longer signed in as the user the stream is for (a reload of the users, a revoked token).
    func databaseStream(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let query = request.uri.queryParameters
        let limit = try databaseLimit(query.get(StrataQuery.limit))
        // The standard reconnection header first (SSE clients send it when they reconnect).
        let resumed = request.headers[Self.lastEventID].flatMap { $0.isEmpty ? nil : $0 }
        let start = try databaseToken(resumed ?? query.get(StrataQuery.after).map { String($0) })
        let limits = configuration.limits
        let server = self
        let body = ResponseBody { writer in
            let clock = ContinuousClock()
            let end = clock.now + limits.maxStreamDuration
            var after = start
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            while !Task.isCancelled {
                // Every pass, also right after an event: a zone changing steadily must not keep a
                // stream past its end or through a shutdown.
                let remaining = end - clock.now
                if remaining <= .zero || server.notifier.isShutDown { break }
                // Registered before looking, so that a change landing in between wakes the wait.
                let waiter = server.notifier.register(databaseOf: user)
                let page: DatabaseChanges
                do {
                    page = try await server.databasePage(for: user, after: after, limit: limit)
                    // After the page is read, as a long poll's answer is checked: a page read
                    // once the caller was signed out is never sent.
                    try server.requireStillSignedIn(request, as: user)
                } catch let error as ServerError {
                    server.notifier.remove(waiter)
                    // The error body an answer would have had (`{"error": {"code", "message", ...}}`).
                    try await writer.write(Self.event("error", id: nil, data: Data(error.jsonBody)))
                    break
                }
                // Empty pages move the position too: the next look starts from the counter as
                // read (one clock read when nothing changed), not from an ever older token.
                // (A token of our own making always parses; were it not to, the stream ends
                // rather than list everything again and again.)
                guard let next = DatabaseToken(page.token) else {
                    server.notifier.remove(waiter)
                    break
                }
                after = next
                if page.reset || !page.zones.isEmpty || !page.removed.isEmpty {
                    server.notifier.remove(waiter)
                    try await writer.write(Self.event("changes", id: page.token, data: try encoder.encode(page)))
                    continue
                }
                let wait = min(limits.streamHeartbeat, server.signedInWait(remaining, context))
                let wake = await server.notifier.wait(waiter, timeout: wait)
                server.notifier.remove(waiter)
                if wake == .cancelled || wake == .shutDown { break }
                if wake == .timedOut {
                    // Nothing changed: a comment keeps the connection (and notices a client gone;
                    // one that stops reading is closed by the server's write timeout).
                    try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                }
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
    }

    private static let lastEventID = HTTPField.Name("Last-Event-ID")!

    /// One event: its fields, then an empty line. `data` is one line of JSON (the encoder escapes
    /// line breaks inside strings).
    private static func event(_ name: String, id: String?, data: Data) -> ByteBuffer {
        var text = ""
        if let id { text += "id: \(id)\n" }
        text += "event: \(name)\ndata: "
        var buffer = ByteBuffer(string: text)
        buffer.writeBytes(data)
        buffer.writeString("\n\n")
        return buffer
    }
}
