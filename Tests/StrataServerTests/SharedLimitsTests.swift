import Foundation
import Logging
import StrataPostgres
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataCore

/// The rate limit and the failed-authentication limit of several `strata serve` instances on one
/// PostgreSQL database: counted in the database (`ZoneStorage.limitBuckets`), so that N
/// instances allow what one allows.
@Suite("Limits shared by the instances on one database")
struct SharedLimitsTests {
    /// Limits with one of them tight and nothing refilling within the test (one token a minute).
    func limits(_ change: (inout ServerConfiguration.Limits) -> Void) -> ServerConfiguration.Limits {
        var limits = ServerConfiguration.Limits()
        change(&limits)
        return limits
    }

    func exchange(_ port: Int, _ path: String = "/v1/zones", token: String?, from source: String? = nil) async throws -> RawConnection.Answer {
        let connection = try RawConnection(port: port, from: source)
        defer { connection.close() }
        return try #require(await connection.exchange("GET", path, token: token), "no answer from port \(port)")
    }

    @Test("failed logins are limited across two PostgreSQL-backed instances: guesses spread over both exhaust one budget, after which both refuse the address (even with a valid token) and other addresses pass")
    func failedLoginsAcrossInstances() async throws {
        let limits = limits { $0.failedAuthLimit = RateLimit(requestsPerSecond: 1.0 / 60.0, burst: 3) }
        try await withTwoInstances(limits: limits) { first, second in
            // Three guesses, spread over the instances: one budget of three.
            for port in [first, second, first] {
                #expect(try await exchange(port, token: "guess").status == 401)
            }
            for port in [second, first] {
                let refused = try await exchange(port, token: Token.alice)
                #expect(refused.status == 429, "instance on port \(port) let the address through after the shared budget was spent")
                let retryAfter = try #require(refused.headers["retry-after"].flatMap { Int($0) })
                #expect((1...60).contains(retryAfter))
            }
            // A guess more on the second instance is refused before its token is looked at.
            #expect(try await exchange(second, token: "guess").status == 429)
            // Another address is not affected, on either instance.
            #expect(try await exchange(first, token: Token.alice, from: "127.0.0.2").status == 200)
            #expect(try await exchange(second, token: Token.alice, from: "127.0.0.2").status == 200)
        }
    }

    @Test("a user's rate limit is one budget across two PostgreSQL-backed instances; other users have their own")
    func rateLimitAcrossInstances() async throws {
        let limits = limits { $0.rateLimit = RateLimit(requestsPerSecond: 1.0 / 60.0, burst: 4) }
        try await withTwoInstances(limits: limits) { first, second in
            for port in [first, second, first, second] {
                #expect(try await exchange(port, token: Token.alice).status == 200)
            }
            for port in [first, second] {
                let refused = try await exchange(port, token: Token.alice)
                #expect(refused.status == 429, "instance on port \(port) let alice past the shared rate limit")
                #expect(refused.headers["retry-after"] != nil)
            }
            #expect(try await exchange(second, token: Token.bob).status == 200)
        }
    }

    @Test("the database's buckets answer as the in-process ones do: the same takes and forced takes give the same outcomes and levels", arguments: [1, 2, 3])
    func databaseBucketsMatchInProcess(seed: UInt64) async throws {
        let site = try StorageSite(.postgres)
        let storage = try await site.open()
        let shared = try #require(storage.limitBuckets)
        let local = InProcessLimitBuckets()
        // A refill of one token in about thirty years: the time between the two calls (seconds on a
        // loaded machine, which an hourly refill made visible) changes nothing a comparison to
        // 1e-3 sees, while the refill arithmetic still runs.
        let limit = RateLimit(requestsPerSecond: 1e-9, burst: 3)
        var generator = SeededGenerator(seed: seed)
        for step in 0..<40 {
            let name: LimitBucketName = Bool.random(using: &generator) ? .requests("u\(Int.random(in: 0..<3, using: &generator))")
                : .failedAuthentications("10.0.0.\(Int.random(in: 0..<3, using: &generator))")
            switch Int.random(in: 0..<3, using: &generator) {
            case 0:
                let (a, b) = (try await shared.level(name, limit: limit), local.level(name, limit: limit))
                #expect((a == nil) == (b == nil) && abs((a ?? 0) - (b ?? 0)) < 1e-3, "seed \(seed) step \(step): level of \(name) \(String(describing: a)) ≠ \(String(describing: b))")
            default:
                let always = Bool.random(using: &generator)
                let (a, b) = (try await shared.take(name, limit: limit, always: always), local.take(name, limit: limit, always: always))
                #expect(a.taken == b.taken && abs(a.tokens - b.tokens) < 1e-3, "seed \(seed) step \(step): take of \(name) (always: \(always)) \(a) ≠ \(b)")
            }
        }
        try await storage.close()
    }

    /// Two servers on two instances of one fresh database, on free ports of 127.0.0.1, with users
    /// alice and bob, for the duration of `body`.
    func withTwoInstances(limits: ServerConfiguration.Limits, _ body: @Sendable (_ first: Int, _ second: Int) async throws -> Void) async throws {
        let site = try StorageSite(.postgres)
        let storages = [try await site.open(), try await site.openAnotherInstance()]
        let users = try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob])
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let servers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for storage in storages {
                    let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0, limits: limits),
                                              logger: Logger(label: "test.shared-limits"))
                    group.addTask { try await app.run(onRunning: { port in announce.yield(port) }) }
                }
                try await group.waitForAll()
            }
        }
        var listening: [Int] = []
        for await port in ports {
            listening.append(port)
            if listening.count == 2 { break }
        }
        let outcome: Result<Void, any Error>
        if listening.count == 2 {
            do {
                try await body(listening[0], listening[1])
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
        } else {
            outcome = .failure(RawConnection.Failure(description: "the two servers did not start"))
        }
        servers.cancel()
        _ = await servers.result
        for storage in storages { try await storage.close() }
        try outcome.get()
    }
}
