import AsyncHTTPClient
import NIOCore
import NIOHTTP1
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

    /// A raw `POST …/state-digests` with `body`, as bob or alice: status and body.
    func postState(_ url: URL, _ body: String, bearer: String = "alice-secret", owner: String? = nil) async throws -> (status: Int, body: String) {
        var target = url.absoluteString + "/v1/zones/notes/state-digests"
        if let owner { target += "?owner=\(owner)" }
        var request = HTTPClientRequest(url: target)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(Array(body.utf8))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 22)
        return (Int(response.status.code), String(buffer: bytes))
    }

    @Test("State by object: a device finds the objects it changed, added and lacks; the state is pinned to one position while the zone moves on; strangers, bad questions, a compacted position and the zone's next life are refused by name",
          .timeLimit(.minutes(8)), arguments: ServerBackend.allCases)
    func stateComparison(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, storage in
            let zone = ZoneReference("notes")
            let transport = HTTPSyncTransport(server: url, bearer: "alice-secret")
            let a = try await open(dir.sub("a"))
            try await write(a, "A", count: 30)
            #expect(try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync().leftToPush == 0)
            let c = try await open(dir.sub("c"))
            #expect(try await SyncEngine(store: c, server: url, zone: "notes", credentials: "alice-secret").sync().pulledTransactions > 0)
            let epoch = try await transport.describeZone(zone).epoch
            let same = try await transport.zoneStateDigests(zone, epoch: epoch).compare(c.stateDigests())
            #expect(same.isEmpty && same.rounds == 1, "a synced device holds the zone's state: \(same.all)")

            // C edits one note and adds one (not pushed); A adds one more (pushed, not pulled by C).
            let edited = try #require(c.fetch("Note").first?.id)
            try await c.transaction { tx in try tx.update(edited, ["title": .string("C's title")]) }
            let added = try await c.transaction { tx in try tx.insert("Note", ["title": .string("C's note")]) }
            let zoneOnly = try await a.transaction { tx in try tx.insert("Note", ["title": .string("A's late note")]) }
            #expect(try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync().leftToPush == 0)
            let remote = transport.zoneStateDigests(zone, epoch: epoch)
            let found = try await remote.compare(c.stateDigests())
            #expect(found.differing == [edited] && found.onlyHere == [added] && found.onlyThere == [zoneOnly], "\(found)")
            let position = try #require(remote.position)
            // The zone moves on; the comparison's position stays (asked for again, answered there).
            try await write(a, "A more", count: 2)
            #expect(try await SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret").sync().leftToPush == 0)
            let again = try await remote.compare(c.stateDigests())
            #expect(again.all == found.all && remote.position == position)

            // A stranger: as if the zone did not exist.
            let root = #"{"epoch": \#(epoch), "questions": [{"digests": [["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"]]}]}"#
            let stranger = try await postState(url, root, bearer: "bob-secret", owner: "alice")
            #expect(stranger.status == 404 && stranger.body.contains("zoneNotFound"), "\(stranger)")
            #expect(try await postState(url, root).status == 200)
            // Bad questions, each refused by name.
            let bad: [(String, String)] = [
                ("{", "the body is not"),
                (#"{"epoch": \#(epoch), "questions": []}"#, "1 to 4 questions"),
                (#"{"epoch": \#(epoch), "questions": [{"digests": [["ffffffff-ffff-ffff-ffff-ffffffffffff", "00000000-0000-0000-0000-000000000000"]]}]}"#, "first ≤ last"),
                (#"{"epoch": \#(epoch), "questions": [{"digests": [["00000000-0000-0000-0000-000000000009", "00000000-0000-0000-0000-00000000000a"], ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]]}]}"#, "sorted and disjoint"),
                (#"{"epoch": \#(epoch), "questions": [{"digests": [["a", "b"]]}]}"#, "two object IDs"),
                (#"{"epoch": \#(epoch), "questions": [{}]}"#, "names 0 ranges"),
                (#"{"epoch": \#(epoch), "epoch": 1, "questions": [{"digests": [["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"]]}]}"#, "which value counts"),
            ]
            for (body, reason) in bad {
                let answer = try await postState(url, body)
                #expect(answer.status == 400 && answer.body.contains(reason), "\(body): \(answer)")
            }
            // A position past the zone's end (as after a restore from a backup), another generation.
            let past = try await postState(url, #"{"epoch": \#(epoch), "position": 999999, "questions": [{"objects": [["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"]]}]}"#)
            #expect(past.status == 410 && past.body.contains("zoneRewound"), "\(past)")
            let merged = try await postState(url, #"{"epoch": \#(epoch), "generation": 77, "questions": [{"digests": [["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"]]}]}"#)
            #expect(merged.status == 410 && merged.body.contains("tokenExpired") && merged.body.contains("merged a device's state"), "\(merged)")
            let tooWide = (0..<4_097).map { #"["00000000-0000-0000-0000-\#(String(format: "%012x", $0 * 2))", "00000000-0000-0000-0000-\#(String(format: "%012x", $0 * 2))"]"# }
            let wide = try await postState(url, #"{"epoch": \#(epoch), "questions": [{"digests": [\#(tooWide.joined(separator: ","))]}]}"#)
            #expect(wide.status == 400 && wide.body.contains("4096"), "\(wide.status) \(wide.body.prefix(300))")

            // Compacted past the comparison's position: its state is no longer known.
            _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
            do {
                _ = try await remote.compare(c.stateDigests())
                Issue.record("a state at a compacted position was answered")
            } catch let error as SyncError {
                #expect(error.code == .tokenExpired, "\(error)")
            }
            // From the zone's end, after the compaction (the snapshot is the state's start).
            let fresh = try await transport.zoneStateDigests(zone, epoch: epoch).compare(c.stateDigests())
            #expect(Set(fresh.onlyThere).isSuperset(of: [zoneOnly]) && fresh.differing == [edited] && fresh.onlyHere == [added])

            // The zone deleted and created again: the old comparison's questions are refused.
            try await storage.deleteZone(ZoneID(owner: "alice", name: "notes"))
            _ = try await transport.ensureZone(zone, create: true)
            do {
                _ = try await transport.zoneStateDigests(zone, epoch: epoch).compare(c.stateDigests())
                Issue.record("a question of the zone's earlier life was answered")
            } catch let error as SyncError {
                #expect(error.code == .zoneReset, "\(error)")
            }
            try await a.close()
            try await c.close()
        }
    }
}
