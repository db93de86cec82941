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

    @Test("the assets each zone holds come along: manifests, chunks once per owner (counted in the owner's stored bytes), links; unfinished uploads do not; a second run stores nothing twice")
    func copyAssets() async throws {
        let site = try StorageSite(.embedded)
        let source = try await site.open() as? EmbeddedZoneStorage
        let embedded = try #require(source)
        let photo = try TestAsset(seed: 1, byteCount: 2 * AssetManifest.chunkSize + 10)
        // Shares photo's first chunk.
        let edited = try TestAsset(bytes: photo.chunk(0) + TestAsset(seed: 2, byteCount: 700).bytes)
        let unfinished = try TestAsset(seed: 3, byteCount: 2 * AssetManifest.chunkSize)
        _ = try await embedded.createZone(name: "photos", owner: "alice", access: .shared, grants: ["bob": .readWrite])
        _ = try await embedded.createZone(name: "backup", owner: "alice", access: .private, grants: [:])
        _ = try await embedded.createZone(name: "mine", owner: "bob", access: .private, grants: [:])
        for (asset, zone, user) in [(photo, ZoneID("photos"), "bob"), (edited, "photos", "alice"), (photo, "bob/mine", "bob")] {
            var state = try await embedded.beginAssetUpload(zone: zone, user: user, manifest: asset.manifest, storedBytesLimit: nil)
            for index in state.missing {
                state = try await embedded.putAssetChunk(zone: zone, user: user, sha256: asset.sha256, index: index, bytes: asset.chunk(index), storedBytesLimit: nil)
            }
            #expect(state.complete)
        }
        #expect(try await embedded.unheldAssets(zone: "backup", user: "alice", assets: [photo.sha256]) == [])
        _ = try await embedded.beginAssetUpload(zone: "photos", user: "bob", manifest: unfinished.manifest, storedBytesLimit: nil)
        _ = try await embedded.putAssetChunk(zone: "photos", user: "bob", sha256: unfinished.sha256, index: 0, bytes: unfinished.chunk(0), storedBytesLimit: nil)

        let url = try PostgresCluster.shared().createDatabase()
        let postgres = try await PostgresZoneStorage.startedForTest(url: PostgresConnectionURL(parsing: url), logger: Logger(label: "test"))
        let report = try await ZoneMigration.copy(from: embedded, to: postgres)
        // Links: photos 2, backup 1, bob's 1. Chunks: alice's three of photo and edited's second; bob's three.
        #expect(report.assets == 4)
        #expect(report.assetBytes == Int64(photo.bytes.count + 700 + photo.bytes.count))
        let held: [(ZoneID, TestAsset)] = [("photos", photo), ("photos", edited), ("backup", photo), ("bob/mine", photo)]
        for (zone, asset) in held {
            #expect(try await postgres.heldAsset(zone: zone, sha256: asset.sha256) == asset.manifest, "\(zone)")
            for index in 0..<asset.chunkCount {
                #expect(try await postgres.assetChunk(zone: zone, sha256: asset.sha256, index: index) == asset.chunk(index), "\(zone) \(index)")
            }
        }
        #expect(try await postgres.heldAsset(zone: "backup", sha256: edited.sha256) == nil)
        #expect(try await postgres.heldAsset(zone: "photos", sha256: unfinished.sha256) == nil)
        // The owner's dedup holds in the database: alice's own upload of photo elsewhere sends nothing.
        _ = try await postgres.createZone(name: "new", owner: "alice", access: .private, grants: [:])
        #expect(try await postgres.beginAssetUpload(zone: "new", user: "alice", manifest: photo.manifest, storedBytesLimit: nil)
            == AssetUploadState(missing: [], complete: true))
        let counted = [try await postgres.storedBytes(owner: "alice"), try await postgres.storedBytes(owner: "bob")]

        let again = try await ZoneMigration.copy(from: embedded, to: postgres)
        #expect(again.alreadyThere.count == 3 && again.assets == 4 && again.assetBytes == 0)
        #expect([try await postgres.storedBytes(owner: "alice"), try await postgres.storedBytes(owner: "bob")] == counted)
        try await embedded.close()
        try await postgres.close()
    }
}
