import Foundation
@_spi(StrataInternals) import Strata
import StrataProtocol
@testable import StrataCore
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// A device compares its history with a zone on a real server by digests: `GET` and `POST
/// /v1/zones/{zone}/digests`, sending neither history.
@Suite("Remote digest comparison through a real server")
struct RemoteDigestTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("body", .string),
                                    Attribute("draft", .string, localOnly: true)])
        Entity("Comment", attributes: [Attribute("text", .string, default: "")])
    }

    func open(_ path: String, replica: ReplicaID? = nil) async throws -> Store {
        var options = StoreOptions(durability: .buffered)
        options.newReplicaID = replica
        return try await Store.open(at: path, schema: Self.schema, options: options)
    }

    func write(_ store: Store, _ label: String, count: Int) async throws {
        for i in 0..<count {
            try await store.transaction { tx in
                let note = try tx.insert("Note", ["title": .string("\(label) \(i)"), "body": .string("body \(i)"), "draft": .string("local \(i)")])
                _ = try tx.insert("Comment", ["text": .string("\(label) comment \(i)")])
                if i % 3 == 0 { try tx.update(note, ["title": .string("\(label) \(i) renamed"), "body": .string("new body \(i)")]) }
            }
        }
    }

    @Test("A synced device equals the zone; a replica written on two devices is named; a stranger is refused; a new life of the zone refuses old questions",
          .timeLimit(.minutes(8)), arguments: ServerBackend.allCases)
    func remoteComparison(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, storage in
            let zone = ZoneReference("notes")
            let transport = HTTPSyncTransport(server: url, bearer: "alice-secret")
            // A writes (local-only drafts included) and syncs.
            let a = try await open(dir.sub("a"))
            try await write(a, "A", count: 40)
            #expect(try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync().leftToPush == 0)
            let remote = transport.zoneDigests(zone)
            let same = try await DigestBisection.run(local: try a.historyDigests(), remote: remote)
            #expect(same.differing.isEmpty, "the local-only drafts are never pushed, and never compared")
            #expect(same.rounds == 2)
            // A round larger than one request may hold is sent in several, and answered whole.
            let wide = transport.zoneDigests(zone)
            let held = try #require(try await wide.contentRanges()[a.replicaID])
            let heldSequences = held.flatMap { $0.lowerBound..<$0.upperBound }
            let singles = (0..<30_000).map { heldSequences[$0 % heldSequences.count] }.map { $0..<$0 + 1 }
            let answers = try await wide.answer([.digests(a.replicaID, pieces: singles.map { [$0] }), .fingerprints(a.replicaID, ranges: (1...20_000).map { UInt64($0)..<UInt64($0) + 1 })])
            guard case .digests(let sums)? = answers.first, case .fingerprints(let prints)? = answers.last else {
                Issue.record("the answers are not a digest answer and a fingerprint answer: \(answers.count)")
                return
            }
            #expect(sums.count == 30_000 && sums.allSatisfy { $0.count == 1 })
            #expect(prints.map(\.sequence) == heldSequences, "every held sequence among the 20,000 asked about, once")
            // The held ranges, then two rounds: a round holds at most 16,384 pieces (four questions
            // of 4,096), the rest and the 20,000 ranges (two questions) fit the second.
            #expect(wide.requests == 3, "requests: \(wide.requests)")

            // B has A's replica ID (a copy restored elsewhere) and wrote other notes, not synced.
            let b = try await open(dir.sub("b"), replica: a.replicaID)
            try await write(b, "B", count: 60)
            let remoteB = transport.zoneDigests(zone)
            let forked = try await DigestBisection.run(local: try b.historyDigests(), remote: remoteB)
            let sequences = forked.differing.filter { $0.replica == a.replicaID }.map(\.sequence)
            #expect(forked.differing.count == sequences.count)
            #expect(sequences.first == 1, "the schema event, stamped at another time, is the first: \(sequences.prefix(5))")
            // The zone holds A's 95 events of the replica (the schema, 80 inserts, 14 updates), B
            // 141: the 95 sequences both hold all differ; B's others are only B's (not compared).
            #expect(sequences == Array(1...95) && !forked.truncated, "named: \(sequences.count)")
            let first = try await DigestBisection.run(local: try b.historyDigests(), remote: transport.zoneDigests(zone), limit: 10)
            #expect(first.differing.map(\.sequence) == Array(1...10) && first.truncated)
            let bytes = remoteB.bytes
            #expect(bytes.sent + bytes.received < 64 * 1024, "bytes: \(bytes)")

            // Bob may not read alice's zone: as if it did not exist.
            let stranger = HTTPSyncTransport(server: url, bearer: "bob-secret").zoneDigests(ZoneReference("notes", owner: "alice"))
            await #expect(throws: SyncError.self) { _ = try await stranger.contentRanges() }
            do {
                _ = try await stranger.contentRanges()
                Issue.record("a stranger was answered the zone's held ranges")
            } catch let error as SyncError {
                #expect(error.code == .zoneNotFound)
            }

            // The zone deleted and created again between two rounds: the old question is refused.
            let pinned = transport.zoneDigests(zone)
            var bisection = DigestBisection(local: try b.historyDigests(), remoteRanges: try await pinned.contentRanges())
            try await storage.deleteZone(ZoneID(owner: "alice", name: "notes"))
            _ = try await transport.ensureZone(zone, create: true)
            do {
                _ = try await pinned.answer(bisection.nextRequests())
                Issue.record("a question of the zone's earlier life was answered")
            } catch let error as SyncError {
                #expect(error.code == .zoneReset, "\(error)")
            }
            try await a.close()
            try await b.close()
        }
    }

    @Test("A masked device compares with what its mask lets it see; a compaction takes the retired events out of the answers", .timeLimit(.minutes(8)))
    func maskedDevice() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, storage in
            let zone = ZoneReference("notes")
            let a = try await open(dir.sub("a"))
            try await write(a, "A", count: 12)
            #expect(try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync().leftToPush == 0)
            let mask = try DownloadMask(entities: ["Comment"], attributes: ["Note": ["body"]])
            var options = SyncOptions()
            options.downloadMask = mask
            let c = try await open(dir.sub("c"))
            #expect(try await SyncEngine(store: c, server: url, zone: "notes", credentials: "alice-secret", options: options).sync().pulledTransactions > 0)
            let transport = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let digests = try c.historyDigests()
            let masked = try await DigestBisection.run(local: digests, remote: transport.zoneDigests(zone, omitting: mask, replica: c.replicaID))
            #expect(masked.differing.isEmpty, "\(masked.differing)")
            // Compared with the whole zone, the events the mask changed differ (the inserts and
            // updates that lost their body): the mask is what made them equal above.
            let whole = try await DigestBisection.run(local: digests, remote: transport.zoneDigests(zone))
            #expect(!whole.differing.isEmpty)
            #expect(whole.differing.allSatisfy { $0.replica == a.replicaID })
            // The zone compacted: what it retired is no longer answered (a reader who could only
            // get the snapshot now learns nothing of the events), though the digests were cached.
            #expect(try await !transport.zoneDigests(zone).contentRanges().isEmpty)
            _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
            #expect(try await transport.zoneDigests(zone).contentRanges().isEmpty)
            try await a.close()
            try await c.close()
        }
    }
}
