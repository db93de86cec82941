import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
@testable import StrataSync
import StrataTestSupport
import Testing

/// A remove names the adds it cancels by (replica, sequence). A read-write grantee used to send a
/// remove naming the owner's next sequences: the owner's later add of that tag, and the re-add
/// after noticing, vanished on every device. The server now takes a remove only of adds the zone
/// holds. Through a real server on a real port, on both backends.
@Suite("Removes name only adds that exist")
struct FutureRemoveTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret"]

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
    }

    /// A transaction of a replica of its own whose one event removes `target` from `note`'s tags,
    /// naming `adds`.
    func remove(_ note: ObjectID, _ target: ObjectID, naming adds: [EventID], replica: ReplicaID = .random(), sequence: UInt64 = 1) -> TransactionRecord {
        TransactionRecord(replica: replica, events: [
            Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000), counter: 0),
                  change: .remove(entity: "Note", object: note, relationship: "tags", target: target, adds: adds)),
        ])
    }

    func labels(_ store: Store, _ note: ObjectID) -> Set<String> {
        Set(store.related(note, "tags").compactMap { $0["label"].stringValue })
    }

    @Test("a grantee's remove naming the owner's future adds is refused (422 unheldAdd) and appends nothing; the owner's later add stays on every device; a remove of an add the zone holds still goes through",
          arguments: ServerBackend.allCases)
    func futureAddsCannotBeRemoved(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let alice = try await open(dir.sub("alice"))
            let aliceEngine = try SyncEngine(store: alice, server: url, zone: "notes", credentials: "alice-secret")
            let (note, tag) = try await alice.transaction { tx in
                (try tx.insert("Note", ["title": "groceries"]), try tx.insert("Tag", ["label": "urgent"]))
            }
            try await aliceEngine.sync()
            try await patient(url, "alice-secret").share("notes", with: "bob", .readWrite)
            let bob = try await open(dir.sub("bob"))
            let bobEngine = try SyncEngine(store: bob, server: url, zone: "notes", owner: "alice", credentials: "bob-secret")
            try await bobEngine.sync()
            let before = try await patient(url, "alice-secret").pull(zone: ZoneReference("notes"), after: nil, limit: 1000, wait: nil)

            // Bob names alice's next 39 sequences for (note, tags, tag).
            let next = await aliceEngine.currentCursor.acknowledged + 1
            let forged = remove(note, tag, naming: (next..<(next + 39)).map { EventID(replica: alice.replicaID, sequence: $0) })
            let bobsTransport = patient(url, "bob-secret")
            await #expect {
                _ = try await bobsTransport.push(zone: ZoneReference("notes", owner: "alice"), transactions: [forged.encoded()])
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .unheldAdd && error.status == 422 && error.sequence == 1 && error.message.contains("\(alice.replicaID)#\(next + 38)")
            }
            let after = try await patient(url, "alice-secret").pull(zone: ZoneReference("notes"), after: nil, limit: 1000, wait: nil)
            #expect(after.transactions.count == before.transactions.count, "nothing of the refused push was appended")

            // Alice tags the note; the tag stays on her device, bob's and a fresh one.
            try await alice.transaction { tx in try tx.add(note, "tags", tag) }
            try await aliceEngine.sync()
            try await bobEngine.sync()
            #expect(labels(alice, note) == ["urgent"])
            #expect(labels(bob, note) == ["urgent"])
            let fresh = try await open(dir.sub("fresh"))
            try await SyncEngine(store: fresh, server: url, zone: "notes", owner: "alice", credentials: "bob-secret").sync()
            #expect(labels(fresh, note) == ["urgent"])

            // Bob removing the tag on his device names alice's add, which the zone holds: it goes through.
            try await bob.transaction { tx in try tx.remove(note, "tags", tag) }
            try await bobEngine.sync()
            try await aliceEngine.sync()
            #expect(labels(alice, note).isEmpty)
            #expect(alice.digest() == bob.digest())
            for store in [alice, bob, fresh] { try await store.close() }
        }
    }

    @Test("a remove naming an add of its own replica that does not come before it is refused (400 badRequest) before any storage is asked",
          arguments: ServerBackend.allCases)
    func ownLaterAddCannotBeRemoved(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let transport = patient(url, "alice-secret")
            _ = try await transport.ensureZone(ZoneReference("notes"), create: true)
            let replica = ReplicaID.random()
            let record = remove(ObjectID(), ObjectID(), naming: [EventID(replica: replica, sequence: 5)], replica: replica)
            await #expect {
                _ = try await transport.push(zone: ZoneReference("notes"), transactions: [record.encoded()])
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .badRequest && error.message.contains("sequence 1 names the replica's own add at sequence 5")
            }
        }
    }
}

/// A state a grantee uploads used to be believed about whose events its values were: values
/// stamped with the owner's replica and sequences the owner never used showed as the owner's, and
/// removals naming the owner's future adds cancelled them when they came. Now the values the zone
/// does not hold are credited to a replica of the uploader's. Through a real server, both backends.
@Suite("State uploads are credited to their uploader")
struct StateCreditTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret"]

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
    }

    @Test("a grantee's state claiming the owner's unused sequences — a changed title and removals of her next tags — is merged as the grantee's: the title shows as his, her ledger does not move, her later tag stays on every device",
          arguments: ServerBackend.allCases)
    func forgedStateIsCreditedToUploader(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, storage in
            let alice = try await open(dir.sub("alice"))
            let aliceEngine = try SyncEngine(store: alice, server: url, zone: "notes", credentials: "alice-secret")
            let (note, tag) = try await alice.transaction { tx in
                (try tx.insert("Note", ["title": "groceries"]), try tx.insert("Tag", ["label": "urgent"]))
            }
            try await aliceEngine.sync()
            let aliceTransport = patient(url, "alice-secret")
            try await aliceTransport.share("notes", with: "bob", .readWrite)
            let acknowledged = await aliceEngine.currentCursor.acknowledged

            // Bob's state: the zone as he pulled it, plus events "by alice" under her next
            // sequences: the title changed, and the tag's removal naming her next 39 adds.
            let bobs = patient(url, "bob-secret")
            let zone = ZoneReference("notes", owner: "alice")
            let pulled = try await bobs.pull(zone: zone, after: nil, limit: 1000, wait: nil)
            let state = ProjectionBuilder()
            for transaction in pulled.transactions { _ = try state.apply(encoded: transaction) }
            let next = acknowledged + 1
            let stamp = HLC(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000), counter: 0)
            let forged = TransactionRecord(replica: alice.replicaID, events: [
                Event(id: EventID(replica: alice.replicaID, sequence: next + 40), hlc: stamp,
                      change: .update(entity: "Note", object: note, fields: ["title": .string("forged")])),
                Event(id: EventID(replica: alice.replicaID, sequence: next + 41), hlc: stamp,
                      change: .remove(entity: "Note", object: note, relationship: "tags", target: tag,
                                      adds: (next..<(next + 39)).map { EventID(replica: alice.replicaID, sequence: $0) })),
            ])
            _ = try state.apply(encoded: forged.encoded())
            _ = try await bobs.uploadState(zone: zone, state: state.snapshotPayload(), replica: .random(), claim: 0, after: pulled.nextToken)

            // The zone holds alice's replica as far as she pushed it; the values came in under a
            // credited replica of bob's.
            let id = ZoneID(owner: "alice", name: "notes")
            #expect(try await storage.acknowledged(zone: id, replica: alice.replicaID) == acknowledged)
            let credited = try await storage.replicas(zone: id).filter { $0.replica.rawValue >> 64 == UInt128(UInt64.max) }
            #expect(credited.map(\.user) == ["bob"], "\(credited)")

            // Alice tags the note; it stays, on her device and a fresh one.
            try await alice.transaction { tx in try tx.add(note, "tags", tag) }
            try await aliceEngine.sync()
            try await aliceEngine.sync()
            #expect(Set(alice.related(note, "tags").compactMap { $0["label"].stringValue }) == ["urgent"])
            let fresh = try await open(dir.sub("fresh"))
            try await SyncEngine(store: fresh, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(fresh.digest() == alice.digest())
            #expect(Set(fresh.related(note, "tags").compactMap { $0["label"].stringValue }) == ["urgent"])
            // The title bob's state carried is there, as his: never as alice's.
            let title = try #require(alice.provenance(note)["title"])
            #expect(alice.object(note)?["title"].stringValue == "forged")
            #expect(title.event.replica != alice.replicaID)
            #expect(alice.authors()[title.event.replica] == "bob")
            try await alice.close()
            try await fresh.close()
        }
    }
}

extension StateCreditTests {
    @Test("a state naming an event the zone holds, with a newer stamp and another value, is not believed under that name: the value comes in as the uploader's",
          arguments: ServerBackend.allCases)
    func heldNameWithNewerStampIsCredited(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let alice = try await open(dir.sub("alice"))
            let aliceEngine = try SyncEngine(store: alice, server: url, zone: "notes", credentials: "alice-secret")
            let note = try await alice.transaction { tx in try tx.insert("Note", ["title": "groceries"]) }
            try await aliceEngine.sync()
            try await patient(url, "alice-secret").share("notes", with: "bob", .readWrite)
            let held = await aliceEngine.currentCursor.acknowledged

            // Bob's state: alice's last held event name, on the note's title, stamped now.
            let bobs = patient(url, "bob-secret")
            let zone = ZoneReference("notes", owner: "alice")
            let pulled = try await bobs.pull(zone: zone, after: nil, limit: 1000, wait: nil)
            let state = ProjectionBuilder()
            let forged = TransactionRecord(replica: alice.replicaID, events: [
                Event(id: EventID(replica: alice.replicaID, sequence: held), hlc: HLC(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000) + 1_000, counter: 0),
                      change: .update(entity: "Note", object: note, fields: ["title": .string("pwned")])),
            ])
            _ = try state.apply(encoded: forged.encoded())
            for transaction in pulled.transactions { _ = try state.apply(encoded: transaction) }
            _ = try await bobs.uploadState(zone: zone, state: state.snapshotPayload(), replica: .random(), claim: 0, after: pulled.nextToken)

            try await aliceEngine.sync()
            let title = try #require(alice.provenance(note)["title"])
            #expect(alice.object(note)?["title"].stringValue == "pwned")
            #expect(title.event.replica != alice.replicaID, "a forged value is shown as alice's")
            #expect(alice.authors()[title.event.replica] == "bob")
            try await alice.close()
        }
    }
}

/// A state upload that changes nothing is no merge: repeated uploads used to add an entry to the
/// zone's catalog each and expire every device's token (11,102 tiny uploads in a minute grew the
/// catalog to 330 KB and made every device bootstrap again). And a user's uploads are rate-limited.
@Suite("Repeated state uploads")
struct RepeatedStateUploadTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret"]

    @Test("uploading the zone's own state again merges nothing: no merge recorded, the uploader's and other devices' tokens still good", arguments: ServerBackend.allCases)
    func noOpUploadIsFolded(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, storage in
            let store = try await Store.open(at: dir.sub("alice"), schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "one"]) }
            let engine = try SyncEngine(store: store, server: url, zone: "notes", credentials: "alice-secret")
            try await engine.sync()
            let transport = patient(url, "alice-secret")
            let zone = ZoneReference("notes")
            let pulled = try await transport.pull(zone: zone, after: nil, limit: 100, wait: nil)
            let state = ProjectionBuilder()
            for transaction in pulled.transactions { _ = try state.apply(encoded: transaction) }
            let id = ZoneID(owner: "alice", name: "notes")
            let merges = try #require(try await storage.zone(id)).merges.count
            for _ in 0..<5 {
                let answer = try await transport.uploadState(zone: zone, state: state.snapshotPayload(), replica: store.replicaID,
                                                             claim: 1, after: pulled.nextToken)
                #expect(answer.upToDate)
            }
            #expect(try #require(try await storage.zone(id)).merges.count == merges, "a merge was recorded for an upload that changed nothing")
            // The token handed out before is still good: a pull after it answers, not 410.
            let after = try await transport.pull(zone: zone, after: pulled.nextToken, limit: 100, wait: nil)
            #expect(after.transactions.isEmpty)
            let report = try await engine.sync()
            #expect(report.bootstraps == 0)
            try await store.close()
        }
    }

    @Test("a user's state uploads past the limit are answered 429 rateLimited with Retry-After before the body is read; another user is not held back")
    func uploadsAreRateLimited() async throws {
        let dir = TemporaryDirectory()
        var limits = ServerConfiguration.Limits()
        limits.stateUploadLimit = RateLimit(requestsPerSecond: 0.001, burst: 2)
        try await withServer(dir.sub("server"), users: Self.users, limits: limits) { url, _ in
            let alice = patient(url, "alice-secret")
            _ = try await alice.ensureZone(ZoneReference("notes"), create: true)
            let empty = ProjectionBuilder().snapshotPayload()
            for _ in 0..<2 { _ = try await alice.uploadState(zone: ZoneReference("notes"), state: empty, replica: nil, claim: 0, after: nil) }
            await #expect {
                _ = try await alice.uploadState(zone: ZoneReference("notes"), state: empty, replica: nil, claim: 0, after: nil)
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .rateLimited && (error.retryAfter ?? 0) >= 1 && error.message.contains("state uploads")
            }
            let bob = patient(url, "bob-secret")
            _ = try await bob.ensureZone(ZoneReference("notes"), create: true)
            _ = try await bob.uploadState(zone: ZoneReference("notes"), state: empty, replica: nil, claim: 0, after: nil)
        }
    }
}

/// A transport for the requests these tests send directly (not through an engine, which retries):
/// a generous timeout, since a machine running every suite at once has been seen to take over
/// 30 s to answer the first request of a PostgreSQL-backed server.
func patient(_ url: URL, _ bearer: String) -> HTTPSyncTransport {
    var transport = HTTPSyncTransport(server: url, bearer: bearer)
    transport.timeout = .seconds(120)
    return transport
}
