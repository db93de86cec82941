import Foundation
import Strata
import StrataCore
import StrataProtocol
import StrataSync
import StrataTestSupport
import Synchronization
import Testing

/// A server from before `DatabaseChanges.user` names nobody: the database's user is learned from
/// the owner of its own zones, and a listing of another user's own zones is refused all the same.
@Suite("Database sync against a server that does not name the user")
struct OlderServerUserTests {
    /// Answers the database changes from a script; every zone call fails (the zones' syncs are
    /// reported among the failures, which this test does not look at).
    final class ScriptedTransport: OfflineZones {
        let answers: Mutex<[DatabaseChanges]>
        init(_ answers: [DatabaseChanges]) { self.answers = Mutex(answers) }

        func databaseChanges(after token: String?, limit: Int, wait: Duration?) async throws -> DatabaseChanges {
            guard let next = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { throw SyncError(.transport, "no more answers") }
            return next
        }
    }

    static func own(_ owner: String, _ name: String = "default") -> DatabaseZone {
        DatabaseZone(name: name, owner: owner, access: .private, role: .owner, token: "z1", epoch: 1, accepted: true)
    }

    @Test("bound to alice by her own zones, a listing of bob's own zones is refused with anotherUser, and the database keeps alice's zones only")
    func anotherUsersOwnZonesAreRefused() async throws {
        let dir = TemporaryDirectory()
        let db = try await Database.open(at: dir.sub("phone"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
        let transport = ScriptedTransport([
            DatabaseChanges(token: "d1", reset: true, moreComing: false, zones: [Self.own("alice")], removed: []),
            DatabaseChanges(token: "d2", reset: true, moreComing: false, zones: [Self.own("bob"), Self.own("bob", "work")], removed: []),
        ])
        let engine = DatabaseSyncEngine(database: db, transport: transport, server: "http://old.example")
        _ = try await engine.sync()
        do {
            let report = try await engine.sync()
            Issue.record("bob's listing was taken: \(report)")
        } catch let error as SyncError {
            #expect(error.code == .anotherUser && error.message.contains("alice") && error.message.contains("bob"), "\(error)")
        }
        #expect(db.zones == [ZoneReference("default")], "a zone of bob's listing came into alice's database")
        #expect(await engine.databaseToken == "d1", "the refused answer's token was kept")
        try await db.close()
    }
}
