import Foundation
@_spi(StrataInternals) import Strata
import StrataLog
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// One database per device with several zones, synced by one engine through a real server.
@Suite("Database sync: several zones through a real server", .serialized)
struct DatabaseSyncEndToEndTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    func device(_ dir: TemporaryDirectory, _ name: String, _ url: URL, _ user: String) async throws -> (Database, DatabaseSyncEngine) {
        let db = try await Database.open(at: dir.sub(name), schema: deviceSchema, options: StoreOptions(durability: .buffered))
        return (db, DatabaseSyncEngine(database: db, server: url, credentials: Self.users[user] ?? ""))
    }

    func titles(_ db: Database, in zones: Set<ZoneReference>? = nil) throws -> [String] {
        try db.fetch("Note", in: zones).compactMap { if case .string(let s) = $0["title"] { s } else { nil } }.sorted()
    }

    @Test("a private zone and two zones other users share appear in one database, are queried together, move objects between them, and a revoked one leaves exactly its objects", arguments: ServerBackend.allCases)
    func privateAndSharedZones(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let groceries = ZoneReference("groceries")
            let project = ZoneReference("project")
            // Bob and Carol each make a zone and share it with Alice.
            let (bob, bobSync) = try await device(dir, "bob", url, "bob")
            try await bob.addZone(groceries)
            try await bob.transaction { tx in try tx.insert("Note", ["title": "milk"], in: groceries) }
            try await bobSync.sync()
            try await bobSync.share(groceries, with: "alice", access: .readWrite)
            let (carol, carolSync) = try await device(dir, "carol", url, "carol")
            try await carol.addZone(project)
            try await carol.transaction { tx in try tx.insert("Note", ["title": "spec"], in: project) }
            try await carolSync.sync()
            let participants = try await carolSync.share(project, with: "alice", access: .read)
            #expect(participants.map(\.user) == ["alice"] && participants.first?.accepted == false)

            // Alice's two devices: the shared zones appear by themselves (accepted automatically).
            let (phone, phoneSync) = try await device(dir, "phone", url, "alice")
            try await phone.transaction { tx in try tx.insert("Note", ["title": "diary"]) }
            let first = try await phoneSync.sync()
            let bobsList = ZoneReference("groceries", owner: "bob")
            let carolsProject = ZoneReference("project", owner: "carol")
            #expect(Set(first.added) == [bobsList, carolsProject], "\(first)")
            #expect(first.failures.isEmpty, "\(first.failures)")
            #expect(try titles(phone) == ["diary", "milk", "spec"], "one query over the private zone and both shared ones")
            #expect(try titles(phone, in: [bobsList]) == ["milk"])
            #expect(try await carolSync.participants(of: project).first?.accepted == true)
            let (laptop, laptopSync) = try await device(dir, "laptop", url, "alice")
            try await laptopSync.sync()
            #expect(try titles(laptop) == ["diary", "milk", "spec"])

            // The phone moves its diary entry into Bob's list while the laptop edits it where it was.
            let diary = try #require(try phone.fetch("Note", where: { $0["title"] == "diary" }).first?.id)
            try await phone.move(diary, to: bobsList)
            try await laptop.transaction { tx in try tx.update(diary, ["rank": 5]) }
            try await laptopSync.sync()
            try await phoneSync.sync()
            try await laptopSync.sync()
            try await bobSync.sync()
            #expect(phone.zone(of: diary) == bobsList && laptop.zone(of: diary) == bobsList)
            #expect(phone.object(diary) == laptop.object(diary), "both devices converge on the moved object")
            #expect(try titles(bob, in: [groceries]) == ["diary", "milk"], "the owner of the destination sees the moved object")
            for zone in phone.zones {
                #expect(phone.store(for: zone)?.digest() == laptop.store(for: zone)?.digest(), "zone \(zone) converged")
            }

            // Carol takes the share back: Alice's devices lose exactly that zone.
            try await carolSync.revoke(project, from: "alice")
            let afterRevoke = try await phoneSync.sync()
            #expect(afterRevoke.removed.map(\.zone) == [carolsProject])
            #expect(afterRevoke.removed.first?.reason == .revoked)
            #expect(!phone.zones.contains(carolsProject))
            #expect(try titles(phone) == ["diary", "milk"], "only the revoked zone's objects left")
            try await laptopSync.sync()
            #expect(!laptop.zones.contains(carolsProject))

            for (db, sync) in [(bob, bobSync), (carol, carolSync), (phone, phoneSync), (laptop, laptopSync)] {
                await sync.stop()
                try await db.close()
            }
        }
    }

    @Test("with nothing new, a sync of a database with many zones costs one request", arguments: [ServerBackend.embedded])
    func idleSyncIsOneRequest(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let (db, sync) = try await device(dir, "phone", url, "alice")
            for index in 0..<20 { try await db.addZone(ZoneReference("z\(index)")) }
            try await db.transaction { tx in try tx.insert("Note", ["title": "x"], in: ZoneReference("z3")) }
            let first = try await sync.sync()
            #expect(first.failures.isEmpty, "\(first.failures)")
            #expect(first.zones.count == 21, "every zone syncs once: created on the server")
            let idle = try await sync.sync()
            #expect(idle.databaseRequests == 1)
            #expect(idle.zones.isEmpty, "no zone changed: none is asked")
            try await db.transaction { tx in try tx.insert("Note", ["title": "y"], in: ZoneReference("z7")) }
            let one = try await sync.sync()
            #expect(Array(one.zones.keys) == [ZoneReference("z7")], "only the zone with a local edit syncs")
            await sync.stop()
            try await db.close()
        }
    }

    @Test("a database belongs to the user who synced it: another user signed in on the device syncs nothing of it (anotherUser) — their account gets none of its zones, and it none of theirs — and the first user goes on", arguments: [ServerBackend.embedded])
    func userSwitchSyncsNothing(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let (db, alice) = try await device(dir, "phone", url, "alice")
            try await db.transaction { tx in try tx.insert("Note", ["title": "alice's secret"]) }
            #expect(try await alice.sync().failures.isEmpty)
            await alice.stop()
            // Bob has a zone of his own with a note.
            let (bobsDB, bobsOwn) = try await device(dir, "bobs-laptop", url, "bob")
            try await bobsDB.transaction { tx in try tx.insert("Note", ["title": "bob's note"]) }
            #expect(try await bobsOwn.sync().failures.isEmpty)
            await bobsOwn.stop()

            // Alice signs out, Bob signs in on the same device, same database; Alice edits after.
            try await db.transaction { tx in try tx.insert("Note", ["title": "alice's second secret"]) }
            let bob = DatabaseSyncEngine(database: db, server: url, credentials: Self.users["bob"] ?? "")
            do {
                let report = try await bob.sync()
                Issue.record("bob synced alice's database: \(report)")
            } catch let error as SyncError {
                #expect(error.code == .anotherUser && error.message.contains("alice") && error.message.contains("bob"), "\(error)")
            }
            // Nor through a zone's own engine, nor by sharing: every request says it is alice's,
            // and the server refuses bob's token for it.
            do {
                let report = try await bob.engine(for: ZoneReference("default")).sync()
                Issue.record("bob pushed alice's zone through its engine: \(report)")
            } catch let error as SyncError {
                #expect(error.code == .anotherUser, "\(error)")
            }
            do {
                try await bob.share(ZoneReference("default"), with: "carol", access: .read)
                Issue.record("bob shared his zone from alice's database")
            } catch let error as SyncError {
                #expect(error.code == .anotherUser, "\(error)")
            }
            // Continuous mode stops by itself (no round can succeed) and says why; it can start again.
            await bob.start()
            for _ in 0..<500 where await bob.stoppedWith == nil { try await Task.sleep(for: .milliseconds(20)) }
            #expect(await bob.stoppedWith?.code == .anotherUser)
            await bob.start()
            #expect(await bob.stoppedWith == nil, "start() after it stopped by itself did nothing")
            for _ in 0..<500 where await bob.stoppedWith == nil { try await Task.sleep(for: .milliseconds(20)) }
            #expect(await bob.stoppedWith?.code == .anotherUser, "continuous mode did not start again")
            await bob.stop()
            #expect(try titles(db) == ["alice's second secret", "alice's secret"], "bob's zone came into alice's database")

            // One transport the app keeps for whoever signs in: alice's database engine made on it
            // says nothing for bob's new database.
            let shared = HTTPSyncTransport(server: url, bearer: Self.users["bob"] ?? "")
            let stale = DatabaseSyncEngine(database: db, transport: shared, server: url.absoluteString)
            let bobsNew = try await Database.open(at: dir.sub("bobs-new"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let fresh = DatabaseSyncEngine(database: bobsNew, transport: shared, server: url.absoluteString)
            let freshReport = try await fresh.sync()
            #expect(freshReport.failures.isEmpty, "\(freshReport.failures)")
            #expect(try titles(bobsNew) == ["bob's note"])
            await #expect(throws: SyncError.self) { try await stale.sync() }
            await fresh.stop()
            await stale.stop()
            try await bobsNew.close()
            let (check, bobAgain) = try await device(dir, "bobs-tablet", url, "bob")
            #expect(try await bobAgain.sync().failures.isEmpty)
            #expect(try titles(check) == ["bob's note"], "alice's notes went into bob's account")
            await bobAgain.stop()

            // Alice signed in again: her second note goes up.
            let again = DatabaseSyncEngine(database: db, server: url, credentials: Self.users["alice"] ?? "")
            #expect(try await again.sync().failures.isEmpty)
            await again.stop()
            let (other, aliceElsewhere) = try await device(dir, "alices-tablet", url, "alice")
            #expect(try await aliceElsewhere.sync().failures.isEmpty)
            #expect(try titles(other) == ["alice's second secret", "alice's secret"])
            await aliceElsewhere.stop()
            for database in [db, bobsDB, check, other] { try await database.close() }
        }
    }

    @Test("sign-out with one TokenProvider: without reset() it keeps the previous user's token, and a new database bound to the next user with bind(to:) syncs nothing as the wrong user (anotherUser); after reset() it syncs as the new user; a bound database refuses to be bound to another user", arguments: [ServerBackend.embedded])
    func signOutResetsTheProvider(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let (bobsDB, bobsOwn) = try await device(dir, "bobs-laptop", url, "bob")
            try await bobsDB.transaction { tx in try tx.insert("Note", ["title": "bob's note"]) }
            #expect(try await bobsOwn.sync().failures.isEmpty)
            await bobsOwn.stop()

            // The app's sign-in: one provider for the app's lifetime, asked for whoever is signed in.
            let signedIn = Mutex("alice")
            let tokens = TokenProvider { _ in Self.users[signedIn.withLock { $0 }] ?? "" }
            let alicesDB = try await Database.open(at: dir.sub("phone-alice"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            try await alicesDB.transaction { tx in try tx.insert("Note", ["title": "alice's secret"]) }
            let alice = DatabaseSyncEngine(database: alicesDB, server: url, tokens: tokens)
            try await alice.bind(to: "alice")
            #expect(try await alice.sync().failures.isEmpty)
            #expect(await alice.user == "alice")
            await alice.stop()

            // Alice signs out, Bob signs in; the app forgets to reset the provider.
            signedIn.withLock { $0 = "bob" }
            let bobsNew = try await Database.open(at: dir.sub("phone-bob"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let bob = DatabaseSyncEngine(database: bobsNew, server: url, tokens: tokens)
            try await bob.bind(to: "bob")
            do {
                let report = try await bob.sync()
                Issue.record("bob's new database synced with alice's cached token: \(report)")
            } catch let error as SyncError {
                #expect(error.code == .anotherUser, "\(error)")
            }
            #expect(try titles(bobsNew).isEmpty, "alice's zone came into bob's database")
            // Signed out properly: the provider asks again, and bob gets his own zone.
            tokens.reset()
            #expect(try await bob.sync().failures.isEmpty)
            #expect(try titles(bobsNew) == ["bob's note"])
            await bob.stop()
            // A database bound to alice cannot be bound to bob, across reopening too.
            let again = DatabaseSyncEngine(database: alicesDB, server: url, tokens: tokens)
            #expect(await again.user == "alice")
            do {
                try await again.bind(to: "bob")
                Issue.record("alice's database was bound to bob")
            } catch let error as SyncError {
                #expect(error.code == .anotherUser, "\(error)")
            }
            try await again.bind(to: "alice")
            await again.stop()
            for database in [alicesDB, bobsDB, bobsNew] { try await database.close() }
        }
    }

    @Test("a whenRemovingZone hook that asks the same engine to sync gets reentrantSync (it would wait for the round it runs in), and the round removes the zone; leaving the default zone is refused before the server drops the grant", .timeLimit(.minutes(2)), arguments: [ServerBackend.embedded])
    func hookSyncingIsRefused(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend, users: Self.users) { url, _ in
            let list = ZoneReference("list")
            let (bob, bobSync) = try await device(dir, "bob", url, "bob")
            try await bob.addZone(list)
            try await bob.transaction { tx in try tx.insert("Note", ["title": "milk"], in: list) }
            try await bobSync.sync()
            try await bobSync.share(list, with: "alice", access: .readWrite)
            let (phone, phoneSync) = try await device(dir, "phone", url, "alice")
            let bobsList = ZoneReference("list", owner: "bob")
            #expect(try await phoneSync.sync().added == [bobsList])

            // The default zone cannot be left: refused on the device, the grant still on the server.
            try await phone.setDefaultZone(bobsList)
            do {
                _ = try await phoneSync.leave(bobsList)
                Issue.record("the default zone was left")
            } catch let error as SyncError {
                #expect(error.code == .badRequest && error.message.contains("default zone"), "\(error)")
            }
            #expect(try await bobSync.participants(of: list).map(\.user) == ["alice"], "the grant went although the zone stayed")
            try await phone.setDefaultZone(ZoneReference("default"))

            let seen = Mutex<[String]>([])
            let later = Mutex<Task<String, Never>?>(nil)
            let (go, signal) = AsyncStream<Void>.makeStream()
            phone.whenRemovingZone { zone, _ in
                do {
                    _ = try await phoneSync.sync()
                    seen.withLock { $0.append("synced") }
                } catch let error as SyncError {
                    seen.withLock { $0.append(error.code.name) }
                } catch {
                    seen.withLock { $0.append("\(error)") }
                }
                // A task started here (it inherits the round's task-locals) that syncs once the
                // round has ended, while another round runs, waits its turn: no reentrantSync.
                later.withLock {
                    $0 = Task {
                        for await _ in go { break }
                        do { return "\(try await phoneSync.sync().failures.count) failures" } catch { return "\(error)" }
                    }
                }
            }
            try await bobSync.revoke(list, from: "alice")
            let report = try await phoneSync.sync()
            #expect(seen.withLock { $0 } == ["reentrantSync"])
            #expect(report.removed.map(\.zone) == [bobsList])
            // The engine is not stuck: the next rounds run, the hook's task's among them.
            async let next = phoneSync.sync()
            signal.yield()
            signal.finish()
            #expect(try await next.failures.isEmpty)
            #expect(await later.withLock({ $0 })?.value == "0 failures")
            for (db, sync) in [(bob, bobSync), (phone, phoneSync)] {
                await sync.stop()
                try await db.close()
            }
        }
    }
}
