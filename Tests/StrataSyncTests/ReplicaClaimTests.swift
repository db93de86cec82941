import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataServer
@testable import StrataSync
import StrataTestSupport
import Testing

/// A replica belongs to its first pusher on the whole server. Another user who learned an owner's
/// replica ID (from the events of a zone they read) used to push it first into a zone of their
/// own, into a zone the owner shared with them later, or claim it with a state upload: the owner's
/// next sync got `replicaNotYours`, forked and pushed its whole history again, and the owner's own
/// log then showed the other user's transactions as the owner's. Through a real server, both
/// backends.
@Suite("Replica IDs cannot be claimed by other users")
struct ReplicaClaimTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret"]

    func open(_ path: String) async throws -> Store {
        try await Store.open(at: path, schema: deviceSchema, options: StoreOptions(durability: .groupCommit))
    }

    func isNotYours(_ error: any Error) -> Bool {
        (error as? SyncError)?.code == .replicaNotYours && (error as? SyncError)?.status == 403
    }

    @Test("bob cannot push alice's replica into his own zone or a zone she shares with him later, nor claim it by a state upload; her syncs never fork; the replica list shows bob only his own replicas",
          arguments: ServerBackend.allCases)
    func claimsRefused(_ backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let alice = try await open(dir.sub("alice"))
            let notes = try SyncEngine(store: alice, server: url, zone: "notes", credentials: "alice-secret")
            try await alice.transaction { tx in _ = try tx.insert("Folder", ["name": "mine"]) }
            try await notes.sync()
            let aliceTransport = patient(url, "alice-secret")
            try await aliceTransport.share("notes", with: "bob", .read)
            let bob = patient(url, "bob-secret")

            // The replica list: alice sees hers; bob, a reader, none of hers.
            #expect(try await aliceTransport.replicas(zone: ZoneReference("notes")).map(\.replica) == [alice.replicaID])
            #expect(try await bob.replicas(zone: ZoneReference("notes", owner: "alice")).isEmpty)

            // Bob learns her replica ID from the zone's events anyway, and pushes it into his own zone.
            let pulled = try await bob.pull(zone: ZoneReference("notes", owner: "alice"), after: nil, limit: 100, wait: nil)
            let learned = try TransactionRecord(decoding: try #require(pulled.transactions.first)).replica
            #expect(learned == alice.replicaID)
            let next = await notes.currentCursor.acknowledged + 1
            func forged(_ sequences: ClosedRange<UInt64>) -> [UInt8] {
                TransactionRecord(replica: learned, events: sequences.map { sequence in
                    Event(id: EventID(replica: learned, sequence: sequence), hlc: HLC(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000), counter: 0),
                          change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": .string("bob's")]))
                }).encoded()
            }
            _ = try await bob.ensureZone(ZoneReference("bobs"), create: true)
            await #expect { _ = try await bob.push(zone: ZoneReference("bobs"), transactions: [forged(1...1)]) } throws: { isNotYours($0) }

            // A zone alice shares with him later, before her device first syncs it.
            try await aliceTransport.share("later", with: "bob", .readWrite)
            await #expect { _ = try await bob.push(zone: ZoneReference("later", owner: "alice"), transactions: [forged(1...next)]) } throws: { isNotYours($0) }
            // A state upload claiming her replica.
            await #expect {
                _ = try await bob.uploadState(zone: ZoneReference("later", owner: "alice"), state: ProjectionBuilder().snapshotPayload(),
                                              replica: learned, claim: 1, after: nil)
            } throws: { isNotYours($0) }

            // Alice goes on in both zones without forking; nothing in either is bob's.
            try await alice.transaction { tx in _ = try tx.insert("Folder", ["name": "after"]) }
            let report = try await notes.sync()
            #expect(report.forks.isEmpty && report.pushedTransactions == 1)
            let later = try SyncEngine(store: alice, server: url, zone: "later", credentials: "alice-secret")
            let laterReport = try await later.sync()
            #expect(laterReport.forks.isEmpty)
            #expect(alice.replicaID == learned)
            let authors = try await aliceTransport.replicas(zone: ZoneReference("later"))
            #expect(authors.map(\.user) == ["alice"], "\(authors)")
            #expect(Set(alice.fetch("Folder").compactMap { $0["name"].stringValue }) == ["mine", "after"])
            try await alice.close()
        }
    }

    @Test("a data directory written before replicas were bound server-wide gets its bindings on open, from the zones' owners; a replica two users own there stays unbound")
    func bindingsFromOlderDirectory() async throws {
        let dir = TemporaryDirectory()
        let alices = ReplicaID.random(), contested = ReplicaID.random()
        func record(_ replica: ReplicaID) throws -> PushedTransaction {
            try #require(PushedTransaction(TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: 1), hlc: HLC(milliseconds: 1_700_000_000_000, counter: 0),
                      change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": "x"])),
            ])))
        }
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "mine", owner: "bob", access: .private, grants: [:])
        _ = try await storage.append(zone: ZoneID(owner: "alice", name: "notes"), user: "alice", replica: alices, transactions: [try record(alices)])
        _ = try await storage.append(zone: ZoneID(owner: "alice", name: "notes"), user: "alice", replica: contested, transactions: [try record(contested)])
        try await storage.close()
        // As an older server left it: no server-wide file, and the contested replica bob's in his zone.
        try FileManager.default.removeItem(atPath: dir.sub("replica-owners.json"))
        let zones = try FileManager.default.contentsOfDirectory(atPath: dir.sub("zones"))
        let bobsZone = try #require(zones.first { $0.hasPrefix("mine-") })
        try Data(#"{"formatVersion": 1, "replicas": [{"replica": "\#(contested)", "user": "bob"}]}"#.utf8).write(to: URL(fileURLWithPath: dir.sub("zones/\(bobsZone)/replicas.json")))

        let reopened = try EmbeddedZoneStorage(directory: dir.path)
        #expect(await reopened.replicaOwners() == [alices: "alice"])
        #expect(FileManager.default.fileExists(atPath: dir.sub("replica-owners.json")))
        await #expect { _ = try await reopened.append(zone: ZoneID(owner: "bob", name: "mine"), user: "bob", replica: alices, transactions: [try record(alices)]) } throws: {
            ($0 as? ZoneStorageError)?.code == .replicaNotYours
        }
        try await reopened.close()
    }

    @Test("new replicas' bindings go to a journal, one synced line each: a copy of the directory taken without a close (a crash) has them all, a torn last line is cut off, a damaged line is refused with its byte offset, and a close folds the journal into replica-owners.json")
    func bindingJournal() async throws {
        let dir = TemporaryDirectory()
        func record(_ replica: ReplicaID) throws -> PushedTransaction {
            try #require(PushedTransaction(TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: 1), hlc: HLC(milliseconds: 1_700_000_000_000, counter: 0),
                      change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": "x"])),
            ])))
        }
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        let notes = ZoneID(owner: "alice", name: "notes")
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.createZone(name: "mine", owner: "bob", access: .private, grants: [:])
        let replicas = (0..<12).map { _ in ReplicaID.random() }
        for replica in replicas {
            _ = try await storage.append(zone: notes, user: "alice", replica: replica, transactions: [try record(replica)])
        }
        let journal = try String(contentsOfFile: dir.sub("replica-owners.journal"), encoding: .utf8)
        #expect(journal.split(separator: "\n").count == 12, "one line per new replica: \(journal)")

        // A crash: the directory as it is while the server runs (every acknowledged push synced).
        let crashed = TemporaryDirectory()
        try FileManager.default.removeItem(atPath: crashed.path)
        try FileManager.default.copyItem(atPath: dir.path, toPath: crashed.path)
        try? FileManager.default.removeItem(atPath: crashed.sub("LOCK"))
        // The append of a 13th binding torn by the crash (its push never acknowledged).
        let handle = try #require(FileHandle(forWritingAtPath: crashed.sub("replica-owners.journal")))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"replica":"0000"#.utf8))
        try handle.close()
        let recovered = try EmbeddedZoneStorage(directory: crashed.path)
        #expect(await recovered.replicaOwners() == Dictionary(uniqueKeysWithValues: replicas.map { ($0, "alice") }))
        await #expect { _ = try await recovered.append(zone: ZoneID(owner: "bob", name: "mine"), user: "bob", replica: replicas[5], transactions: [try record(replicas[5])]) } throws: {
            ($0 as? ZoneStorageError)?.code == .replicaNotYours
        }
        try await recovered.close()
        // Closed: folded into the one file, the journal gone.
        #expect(!FileManager.default.fileExists(atPath: crashed.sub("replica-owners.journal")))
        let reopened = try EmbeddedZoneStorage(directory: crashed.path)
        #expect(await reopened.replicaOwners().count == 12)
        try await reopened.close()

        // A damaged line before the last: refused, with where.
        try await storage.close()
        let damaged = Array(journal.utf8.prefix(10)) + Array("not json\n".utf8) + Array(journal.utf8)
        try Data(damaged).write(to: URL(fileURLWithPath: dir.sub("replica-owners.journal")))
        #expect { _ = try EmbeddedZoneStorage(directory: dir.path) } throws: {
            ($0 as? ZoneStorageError)?.code == .storageFailure && "\($0)".contains("at byte 0")
        }
    }
}
