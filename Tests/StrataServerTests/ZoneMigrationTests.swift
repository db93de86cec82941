import Foundation
import Logging
import Strata
import StrataPostgres
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// `strata migrate`'s copy of an embedded data directory into PostgreSQL: exact (the tokens
/// devices hold go on working, retries of retired history are still checked for forks),
/// verified zone by zone, and safe to run again.
@Suite("Migration of a data directory into PostgreSQL")
struct ZoneMigrationTests {
    let a = ReplicaID(rawValue: 0xA)
    let b = ReplicaID(rawValue: 0xB)

    @Test("every zone is copied exactly: the same digests, tokens of the directory's history go on, retired history still tells a retry from a fork; a second run skips what is there, a differing zone is refused")
    func copyEveryZone() async throws {
        let site = try StorageSite(.embedded)
        let source = try await site.open() as? EmbeddedZoneStorage
        let embedded = try #require(source)
        _ = try await embedded.createZone(name: "notes", owner: "alice", access: .shared, grants: ["bob": .read])
        var records: [TransactionRecord] = []
        for sequence in UInt64(1)...60 {
            let record = transaction(a, sequence...sequence, title: String(repeating: "n", count: 150))
            records.append(record)
            _ = try await embedded.append(zone: "notes", replica: a, transactions: [try pushed(record)])
        }
        _ = try await embedded.append(zone: "notes", user: "alice", replica: b, transactions: [try pushed(transaction(b, 1...3))])
        _ = try await embedded.compact(zone: "notes", retaining: 8)
        _ = try await embedded.createZone(name: "other", owner: "bob", access: .private, grants: [:])
        let upload = ProjectionBuilder()
        _ = try upload.apply(encoded: transaction(b, 1...2, title: "healed").encoded())
        _ = try await embedded.mergeState(zone: "bob/other", user: "bob", replica: nil, claim: 0, state: StateUpload(payload: upload.snapshotPayload()), basis: nil)
        let notes = try #require(try await embedded.zone("notes"))
        let end = try await embedded.endPosition(zone: "notes")
        let token = try await PullStart.token(notes, at: end - 2, storage: embedded)
        let expected = [try await ZoneDigest(zone: "notes", in: embedded), try await ZoneDigest(zone: "bob/other", in: embedded)]

        let url = try PostgresCluster.shared().createDatabase()
        let postgres = try await PostgresZoneStorage.startedForTest(url: PostgresConnectionURL(parsing: url), logger: Logger(label: "test"))
        let report = try await ZoneMigration.copy(from: embedded, to: postgres)
        #expect(Set(report.copied) == ["notes", "bob/other"] && report.alreadyThere.isEmpty)
        #expect(report.transactions == Int(end - (try await embedded.startPosition(zone: "notes"))))
        #expect([try await ZoneDigest(zone: "notes", in: postgres), try await ZoneDigest(zone: "bob/other", in: postgres)] == expected)

        // A device's token of the directory's history is a token of the database's.
        let copied = try #require(try await postgres.zone("notes"))
        #expect(copied == notes)
        #expect(try await PullStart.position(after: token.description, zone: copied, storage: postgres) == end - 2)
        // Retired history: a retry is acknowledged, another transaction under its sequences is a fork.
        #expect(try await postgres.append(zone: "notes", replica: a, transactions: [try pushed(records[4])]).appended == 0)
        let fork = try pushed(transaction(a, 5...5, title: "other"))
        let a = a
        let refused = await refusal { () async throws(ZoneStorageError) in _ = try await postgres.append(zone: "notes", replica: a, transactions: [fork]) }
        #expect(refused?.code == .replicaForked)
        // The server-wide replica owners came along: alice's replica stays hers in the database.
        let stolen = try pushed(transaction(a, 1...1))
        let claimed = await refusal { () async throws(ZoneStorageError) in _ = try await postgres.append(zone: "bob/other", user: "bob", replica: a, transactions: [stolen]) }
        #expect(claimed?.code == .replicaNotYours)
        let next = try await postgres.append(zone: "notes", replica: a, transactions: [try pushed(transaction(a, 61...61))])
        #expect(next.appended == 1 && next.position == end + 1)

        // Again: "notes" differs now (it grew), "bob/other" is the same.
        do {
            _ = try await ZoneMigration.copy(from: embedded, to: postgres)
            Issue.record("a differing zone was accepted")
        } catch let error as ZoneStorageError {
            #expect(error.code == .zoneExists && error.message.contains("differs"), "\(error)")
        }
        try await postgres.deleteZone("notes")
        let again = try await ZoneMigration.copy(from: embedded, to: postgres)
        #expect(again.copied == ["notes"] && again.alreadyThere == ["bob/other"])
        try await embedded.close()
        try await postgres.close()
    }
}
