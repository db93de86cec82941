import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// The device registry through a real server: after a sync each device reports the digest of its
/// state at its token (`POST /v1/zones/{zone}/devices`), the server compares it with the zone's
/// own state there, and the zone's owner sees every device (`GET`), the divergent ones flagged.
@Suite("Device registry: devices report their state, the server flags one that diverged")
struct DeviceRegistryTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("draft", .string, localOnly: true)])
    }
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: Self.schema, options: StoreOptions(durability: .buffered))
    }

    func engine(_ store: Store, _ url: URL, user: String = "alice", owner: String? = nil, mask: DownloadMask = .none) throws -> SyncEngine {
        var options = SyncOptions()
        // Every sync with something new reports (the default waits a minute between reports).
        options.stateReportInterval = .zero
        options.downloadMask = mask
        return try SyncEngine(store: store, server: url, zone: "notes", owner: owner, credentials: "\(user)-secret", options: options)
    }

    func write(_ store: Store, _ label: String, count: Int) async throws {
        for i in 0..<count {
            try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("\(label) \(i)"), "draft": .string("local \(i)")]) }
        }
    }

    /// `strata_divergent_devices` as the server's `/metrics` answers it, once it reads `expected`
    /// or after 10 s: the server counts again in the background after each report and scrape.
    func divergentMetric(_ url: URL, settlingAt expected: Int) async throws -> Int? {
        var value: Int?
        for _ in 0..<100 {
            let (data, _) = try await URLSession.shared.data(from: url.appendingPathComponent("metrics"))
            let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("strata_divergent_devices ") }
            value = line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
            if value == expected { return value }
            try await Task.sleep(for: .milliseconds(100))
        }
        return value
    }

    func refusal(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as SyncError {
            return error.code.description
        } catch {
            return "\(error)"
        }
    }

    @Test("every device reports after a sync; one holding events the zone never had is flagged within one sync, and cleared once the zone has them",
          .timeLimit(.minutes(6)), arguments: ServerBackend.allCases)
    func divergenceFlagged(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let zone = ZoneReference("notes")
            let alice = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let a = try await open(dir.sub("a"))
            let b = try await open(dir.sub("b"))
            let c = try await open(dir.sub("c"))
            try await write(a, "A", count: 12)
            let first = try await engine(a, url).sync()
            #expect(first.stateCheck?.check == .consistent, "\(String(describing: first.stateCheck))")
            let engineB = try engine(b, url)
            let synced = try await engineB.sync()
            let atB = try #require(synced.stateCheck)
            #expect(atB.check == .consistent && atB.zoneDigest == b.digest(), "\(atB)")
            #expect(try await divergentMetric(url, settlingAt: 0) == 0)

            // C writes offline; B gets C's transactions by another way than the zone (as a
            // peer-to-peer copy, or a faulty engine, would): B's state is one the zone never had.
            try await write(c, "C", count: 3)
            let own = try c.transactions().filter { $0.transaction.replica == c.replicaID }.map(\.transaction)
            try await b.applyRemote(own)
            let diverged = try await engineB.sync()
            let flagged = try #require(diverged.stateCheck, "B's sync after the change reports")
            #expect(flagged.check == .divergent && flagged.zoneDigest != b.digest(), "\(flagged)")
            #expect(flagged.position == atB.position, "B's token did not move; the zone's state there is the same")

            // The owner sees both devices, B flagged; the metric counts it.
            let listed = try await alice.devices(zone)
            #expect(listed.devices.count == 2 && listed.divergent == 1, "\(listed)")
            let entryB = try #require(listed.devices.first { $0.replica == b.replicaID.description })
            #expect(entryB.check == .divergent && entryB.user == "alice" && entryB.digest == b.digest() && entryB.pendingTransactions == 0)
            #expect(entryB.library == StrataLibraryVersion.current && entryB.schemaVersion == 1 && entryB.position == listed.end)
            let now = UInt64(Date().timeIntervalSince1970 * 1000)
            #expect(entryB.lastSeen <= now && entryB.lastSeen + 120_000 > now, "the server's clock: \(entryB.lastSeen), now \(now)")
            #expect(listed.devices.first { $0.replica == a.replicaID.description }?.check == .consistent)
            #expect(try await divergentMetric(url, settlingAt: 1) == 1)

            // Once C pushes, the zone holds what B holds: B's next sync finds it consistent again.
            _ = try await engine(c, url).sync()
            let healed = try #require(try await engineB.sync().stateCheck)
            #expect(healed.check == .consistent && healed.position > atB.position, "\(healed)")
            #expect(try await alice.devices(zone).divergent == 0)
            #expect(try await divergentMetric(url, settlingAt: 0) == 0)
            for store in [a, b, c] { try await store.close() }
        }
    }

    @Test("a report claims nothing the server believes: another user's replica, a forged or old token, a bad digest are refused; readers with pending edits or a mask are not compared; only the owner lists",
          .timeLimit(.minutes(6)), arguments: ServerBackend.allCases)
    func reportsChecked(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let zone = ZoneReference("notes")
            let alice = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let bob = HTTPSyncTransport(server: url, bearer: "bob-secret")
            let carol = HTTPSyncTransport(server: url, bearer: "carol-secret")
            let a = try await open(dir.sub("a"))
            try await write(a, "A", count: 5)
            let synced = try await engine(a, url).sync()
            let token = try #require(synced.token)
            let digest = a.digest()
            _ = try await alice.updateZone(zone, settings: ZoneSettings(access: .shared, grants: ["bob": .read]))
            let owned = ZoneReference("notes", owner: "alice")

            func claim(replica: ReplicaID, token: String = token, digest: String = digest, pending: UInt64 = 0, masked: Bool = false,
                       library: String = StrataLibraryVersion.current) -> DeviceReport {
                DeviceReport(replica: replica.description, token: token, digest: digest, pendingTransactions: pending, pendingAssets: 0,
                             masked: masked, library: library)
            }
            // Bob, a reader, may not report as Alice's device (her replica pushed here)…
            #expect(await refusal { _ = try await bob.reportDevice(owned, claim(replica: a.replicaID)) } == "replicaNotYours")
            // A report under Alice's other device's ID (it reported, never pushed) is Bob's own
            // entry: it neither replaces nor blocks hers.
            let quiet = ReplicaID.random()
            #expect(try await alice.reportDevice(zone, claim(replica: quiet)).check == .consistent)
            #expect(try await bob.reportDevice(owned, claim(replica: quiet, digest: String(repeating: "0", count: 64))).check == .divergent)
            #expect(try await alice.reportDevice(zone, claim(replica: quiet)).check == .consistent)
            let both = try await alice.devices(zone).devices.filter { $0.replica == quiet.description }
            #expect(Set(both.map { "\($0.user) \($0.check)" }) == ["alice consistent", "bob divergent"], "\(both)")
            // A stranger cannot tell the zone exists.
            #expect(await refusal { _ = try await carol.reportDevice(owned, claim(replica: .random())) } == "zoneNotFound")
            // Tokens are checked as a pull's: forged past the end, of another life, not a token.
            let parsed = try ChangeToken(parsing: token)
            let ahead = ChangeToken(epoch: parsed.epoch, position: parsed.position + 50, generation: parsed.generation, fingerprint: parsed.fingerprint)
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, token: ahead.description)) } == "zoneRewound")
            let otherLife = ChangeToken(epoch: parsed.epoch &+ 1, position: parsed.position, generation: parsed.generation, fingerprint: parsed.fingerprint)
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, token: otherLife.description)) } == "zoneReset")
            let forgedHistory = ChangeToken(epoch: parsed.epoch, position: parsed.position, generation: parsed.generation, fingerprint: parsed.fingerprint ^ 1)
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, token: forgedHistory.description)) } != nil)
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, token: "not a token")) } == "badRequest")
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, digest: "XYZ")) } == "badRequest")
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, library: String(repeating: "v", count: 65))) } == "badRequest")
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet, library: "bad\u{7}bell")) } == "badRequest")

            // Bob's own device, reading: in step it is consistent; with edits it cannot push it is
            // ahead of the zone (not compared); a masked device holds part of the zone.
            let b = try await open(dir.sub("b"))
            let bobEngine = try engine(b, url, user: "bob", owner: "alice")
            #expect(try await bobEngine.sync().stateCheck?.check == .consistent)
            try await write(b, "B", count: 1)
            let pending = try await bobEngine.sync().stateCheck
            #expect(pending?.check == .unverified && pending?.reason?.contains("not pushed") == true, "\(String(describing: pending))")
            let masked = try await bob.reportDevice(owned, claim(replica: b.replicaID, masked: true))
            #expect(masked.check == .unverified && masked.zoneDigest == nil)

            // Only the owner lists the registry; a reader is refused, a stranger told nothing.
            #expect(await refusal { _ = try await bob.devices(owned) } == "forbidden")
            #expect(await refusal { _ = try await carol.devices(owned) } == "zoneNotFound")
            let listed = try await alice.devices(zone)
            let entries = Set(listed.devices.map { "\($0.user) \($0.replica)" })
            #expect(entries == ["alice \(a.replicaID)", "alice \(quiet)", "bob \(quiet)", "bob \(b.replicaID)"], "\(entries)")
            #expect(listed.divergent == 1, "only Bob's claim of a zero digest; no refused report left a record: \(listed.devices.map(\.check))")

            // A zone deleted and created again starts with an empty registry; an old token is refused.
            #expect(try await deleteZone(url, "notes"))
            _ = try await alice.ensureZone(zone, create: true)
            #expect(try await alice.devices(zone).devices.isEmpty)
            #expect(await refusal { _ = try await alice.reportDevice(zone, claim(replica: quiet)) } == "zoneReset")
            for store in [a, b] { try await store.close() }
        }
    }

    /// Deletes Alice's zone `name` (`DELETE /v1/zones/{zone}`).
    func deleteZone(_ url: URL, _ name: String) async throws -> Bool {
        var request = URLRequest(url: url.appendingPathComponent("v1/zones/\(name)"))
        request.httpMethod = "DELETE"
        request.setValue("Bearer alice-secret", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode == 204
    }

    @Test("the registry survives a restart of the server", .timeLimit(.minutes(4)), arguments: ServerBackend.allCases)
    func registryKept(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        let a = try await open(dir.sub("a"))
        try await write(a, "A", count: 3)
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let check = try await engine(a, url).sync().stateCheck
            #expect(check?.check == .consistent)
        }
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let listed = try await HTTPSyncTransport(server: url, bearer: "alice-secret").devices(ZoneReference("notes"))
            #expect(listed.devices.map(\.replica) == [a.replicaID.description] && listed.devices.first?.check == .consistent)
        }
        try await a.close()
    }
}
