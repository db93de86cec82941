import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Strata
import StrataServer
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// `strata serve` under many large uploads at once: the upload memory budget keeps the process's
/// resident memory bounded, and every push it acknowledged is stored.
@Suite("strata serve: resident memory bounded under concurrent maximum-size uploads")
struct ServeBoundsTests {
    typealias Server = ServeChild

    /// A push body: `count` transactions of `replica` (sequences 1…count), each one event holding
    /// a title of `titleBytes` bytes.
    static func pushBody(_ replica: ReplicaID, count: Int, titleBytes: Int) -> [UInt8] {
        let title = String(repeating: "m", count: titleBytes)
        let records = (1...UInt64(count)).map { sequence in
            TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                      change: .insert(entity: "Note", object: ObjectID(), fields: ["title": .string(title)])),
            ])
        }
        return TransactionFrames.encode(records.map { $0.encoded() })
    }

    /// Sends one request; the status, body and `Retry-After`.
    static func send(_ session: URLSession, _ url: URL, _ method: String, _ path: String, body: [UInt8]? = nil) async throws
        -> (status: Int, body: Data, retryAfter: Int?) {
        var request = URLRequest(url: try #require(URL(string: url.absoluteString + path)))
        request.httpMethod = method
        request.timeoutInterval = 300
        request.setValue("Bearer alice-secret", forHTTPHeaderField: "Authorization")
        let (data, response): (Data, URLResponse)
        if let body {
            (data, response) = try await session.upload(for: request, from: Data(body))
        } else {
            (data, response) = try await session.data(for: request)
        }
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, data, http.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0) })
    }

    @Test("32 concurrent 8 MiB pushes under a 32 MiB upload budget: the server's peak resident memory stays within budget plus a margin, and every acknowledged push is stored")
    func concurrentUploads() async throws {
        let budget = 32 << 20
        let clients = 32
        let transactionsPerPush = 8
        let titleBytes = 1 << 20 - 256
        let dir = TemporaryDirectory()
        let users = dir.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: users))
        let server = try Server(data: dir.sub("server-data"), users: users, scratch: dir.path, arguments: [
            "--limit", "uploadMemoryBudget=\(budget)",
            "--limit", "maxBodyBytes=\(16 << 20)",
            // Long enough that most uploads wait their turn instead of being refused; a refused
            // one is retried after its Retry-After, as a client does.
            "--limit", "uploadBudgetWait=20",
        ])
        defer { server.kill9() }

        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = clients * 2
        let session = URLSession(configuration: configuration)
        let url = server.url
        #expect(try await Self.send(session, url, "PUT", "/v1/zones/notes", body: []).status == 201)
        // Warm up (first push, first zone files), then take the baseline.
        let warm = try await Self.send(session, url, "POST", "/v1/zones/notes/push",
                                       body: Self.pushBody(ReplicaID.random(), count: 1, titleBytes: 1 << 20))
        #expect(warm.status == 200, "\(String(decoding: warm.body, as: UTF8.self))")
        let baseline = try server.memory("VmHWM")

        let replicas = (0..<clients).map { _ in ReplicaID.random() }
        let bodies = replicas.map { Self.pushBody($0, count: transactionsPerPush, titleBytes: titleBytes) }
        let offered = bodies.reduce(0) { $0 + $1.count }
        let outcomes = try await withThrowingTaskGroup(of: (acknowledged: Bool, refusals: Int).self) { group in
            for body in bodies {
                group.addTask {
                    var refusals = 0
                    while true {
                        let answer = try await Self.send(session, url, "POST", "/v1/zones/notes/push", body: body)
                        if answer.status == 503 {
                            refusals += 1
                            if refusals > 20 { return (false, refusals) }
                            try await Task.sleep(for: .seconds(answer.retryAfter ?? 1))
                            continue
                        }
                        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                        return (answer.status == 200, refusals)
                    }
                }
            }
            var outcomes: [(acknowledged: Bool, refusals: Int)] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let peak = try server.memory("VmHWM")
        let growth = peak - baseline
        let refusals = outcomes.reduce(0) { $0 + $1.refusals }
        print("strata serve: \(clients) pushes of \(offered / clients) bytes (\(offered >> 20) MiB offered) under a \(budget >> 20) MiB budget: VmHWM \(baseline >> 20) MiB before, \(peak >> 20) MiB after (+\(growth >> 20) MiB), VmRSS now \(try server.memory("VmRSS") >> 20) MiB; \(refusals) answers 503 serverBusy, retried")

        // Every body held at once would be `offered` bytes (and a multiple of that while decoded
        // and stored); the budget admits `budget` bytes of bodies at a time. Each admitted body is
        // held about three times over at its peak (its bytes, the decoded transactions, their
        // encoding for the log), plus allocator slack: 4 × budget + 64 MiB is generous for that
        // and still far below what the offered bytes alone would take.
        #expect(offered > 4 * budget + (64 << 20))
        #expect(growth < 4 * budget + (64 << 20), "resident memory grew by \(growth >> 20) MiB for a \(budget >> 20) MiB budget")
        let unacknowledged = outcomes.filter { !$0.acknowledged }.count
        #expect(unacknowledged == 0, "\(unacknowledged) pushes were never acknowledged")

        // Every acknowledged push is stored: each replica's last sequence is held.
        let listed = try await Self.send(session, url, "GET", "/v1/zones/notes/replicas")
        #expect(listed.status == 200)
        let held = try JSONDecoder().decode(ReplicaList.self, from: listed.body).replicas
        let acknowledged = Dictionary(uniqueKeysWithValues: held.map { ($0.replica, $0.acknowledged) })
        for replica in replicas {
            #expect(acknowledged[replica] == UInt64(transactionsPerPush), "replica \(replica) holds \(acknowledged[replica] ?? 0) transactions")
        }
        #expect(server.process.isRunning, "strata serve died: \(server.stderr)")
    }
}
