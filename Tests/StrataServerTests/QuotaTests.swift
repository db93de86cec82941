import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataServer
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore

/// Per-user quotas: zones per user, grants per zone, stored bytes per user. Over one, the answer is
/// `403 quotaExceeded` naming the quota, its limit and the current use, and nothing changes.
@Suite("Quotas: zones, grants and stored bytes per user")
struct QuotaTests {
    /// A note whose title is `bytes` random letters (so that compression cannot shrink it much).
    func bulky(_ replica: ReplicaID, _ sequence: UInt64, bytes: Int) -> TransactionRecord {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return transaction(replica, sequence...sequence, title: String((0..<bytes).map { _ in letters.randomElement() ?? "a" }))
    }

    @Test("the defaults: 1,000 zones per user, 1,000 grants per zone, 10 GiB stored per user")
    func defaults() {
        let limits = ServerConfiguration.Limits()
        #expect(limits.maxZonesPerUser == 1000)
        #expect(limits.maxGrantsPerZone == 1000)
        #expect(limits.maxStoredBytesPerUser == 10 << 30)
    }

    @Test("a zone past the owner's zones quota is refused 403 quotaExceeded, nothing created; other users and updates are unaffected")
    func zonesPerUser() async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxZonesPerUser = 2
        let server = try TestServer(limits: limits)
        try await server.test { client in
            try await client.createZone("one")
            try await client.createZone("two")
            let refused = try await client.execute(uri: "/v1/zones/three", method: .put, headers: auth(Token.alice))
            #expect(refused.status == .forbidden)
            let error = try errorBody(refused)
            #expect(error.code == "quotaExceeded")
            #expect(error.message.contains("zonesPerUser") && error.message.contains("2 zones") && error.message.contains("owns 2"), "\(error.message)")
            #expect(try await client.execute(uri: "/v1/zones/three", method: .get, headers: auth(Token.alice)).status == .notFound)
            #expect(String(decoding: server.app.metrics.exposition(), as: UTF8.self).contains("strata_quota_refusals_total 1"))
            // Changing a zone one already has is no new zone; bob has a quota of his own.
            #expect(try await client.execute(uri: "/v1/zones/one", method: .put, headers: auth(Token.alice), body: ByteBuffer(string: #"{"access": "public"}"#)).status == .ok)
            try await client.createZone("three", as: Token.bob)
            // Deleting a zone makes room again.
            #expect(try await client.execute(uri: "/v1/zones/two", method: .delete, headers: auth(Token.alice)).status == .noContent)
            try await client.createZone("three")
        }
    }

    @Test("concurrent creates cannot pass the zones quota together: of 8 at once under a quota of 3, exactly 3 are created")
    func concurrentCreates() async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxZonesPerUser = 3
        let server = try TestServer(limits: limits)
        try await server.test(.live) { client in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await client.execute(uri: "/v1/zones/z\(index)", method: .put, headers: auth(Token.alice)).status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 3, "\(statuses)")
            #expect(statuses.filter { $0 == 403 }.count == 5, "\(statuses)")
        }
        let reopened = try EmbeddedZoneStorage(directory: server.directory.sub("data"))
        #expect(try await reopened.zones().count == 3)
        try await reopened.close()
    }

    @Test("grants past the per-zone quota are refused 403 quotaExceeded, on create and on update, and the zone keeps its grants")
    func grantsPerZone() async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxGrantsPerZone = 2
        let server = try TestServer(limits: limits)
        try await server.test { client in
            let three = #"{"access": "shared", "grants": {"bob": "read", "carol": "read", "dave": "read"}}"#
            let refused = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice), body: ByteBuffer(string: three))
            #expect(refused.status == .forbidden)
            let error = try errorBody(refused)
            #expect(error.code == "quotaExceeded")
            #expect(error.message.contains("grantsPerZone") && error.message.contains("2 grants") && error.message.contains("asks for 3"), "\(error.message)")
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice)).status == .notFound)

            try await client.createZone("notes", #"{"access": "shared", "grants": {"bob": "read", "carol": "read"}}"#)
            let update = try await client.execute(uri: "/v1/zones/notes", method: .put, headers: auth(Token.alice), body: ByteBuffer(string: three))
            #expect(update.status == .forbidden)
            #expect(try errorBody(update).message.contains("has 2"))
            let zone = try await client.execute(uri: "/v1/zones/notes", method: .get, headers: auth(Token.alice))
            #expect(try JSONDecoder().decode(ZoneDescription.self, from: zone.body.data).grants == ["bob": .read, "carol": .read])
        }
    }

    @Test("a push that would take the zone owner past the stored-bytes quota is refused whole (403 quotaExceeded), whoever pushes it and in whichever zone; the counter survives a reopen")
    func storedBytesPerUser() async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxStoredBytesPerUser = 40_000
        let server = try TestServer(limits: limits)
        let phone = ReplicaID.random()
        let tablet = ReplicaID.random()
        try await server.test { client in
            try await client.createZone("notes", #"{"access": "shared", "grants": {"bob": "readWrite"}}"#)
            try await client.createZone("more")
            // About 8 KB per push: the first ones fit.
            var sequence: UInt64 = 1
            var accepted = 0
            for _ in 0..<3 {
                let response = try await client.push("notes", [bulky(phone, sequence, bytes: 8_000)])
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                sequence += 1
                accepted += 1
            }
            let used = try await server.storage.storedBytes(owner: "alice")
            #expect(used > 24_000 && used < 40_000, "\(used)")
            let end = try await server.storage.endPosition(zone: "notes")

            // One push of two transactions that would cross the limit: refused whole.
            let refused = try await client.push("notes", [bulky(phone, sequence, bytes: 8_000), bulky(phone, sequence + 1, bytes: 8_000)])
            #expect(refused.status == .forbidden)
            let error = try errorBody(refused)
            #expect(error.code == "quotaExceeded")
            #expect(error.message.contains("storedBytesPerUser") && error.message.contains("40000") && error.message.contains("stores \(used)"), "\(error.message)")
            #expect(try await server.storage.endPosition(zone: "notes") == end)
            #expect(try await server.storage.storedBytes(owner: "alice") == used)
            #expect(try await server.storage.acknowledged(zone: "notes", replica: phone) == sequence - 1)

            // bob pushing to alice's zone counts against alice; so does another zone of hers.
            let byBob = try await client.push("alice/notes", [bulky(tablet, 1, bytes: 20_000)], as: Token.bob)
            #expect(byBob.status == .forbidden)
            #expect(try errorBody(byBob).code == "quotaExceeded")
            let elsewhere = try await client.push("more", [bulky(tablet, 1, bytes: 20_000)])
            #expect(elsewhere.status == .forbidden)
            #expect(try await server.storage.endPosition(zone: "more") == 0)

            // A state upload (healing) that would cross the limit is refused too, before it is merged.
            let builder = ProjectionBuilder()
            _ = try builder.apply(encoded: bulky(tablet, 1, bytes: 20_000).encoded())
            let upload = try await client.execute(uri: "/v1/zones/notes/state", method: .post, headers: auth(Token.alice),
                                                  body: ByteBuffer(bytes: builder.snapshotPayload()))
            #expect(upload.status == .forbidden)
            #expect(try errorBody(upload).message.contains("state upload"))
            #expect(try await server.storage.snapshotPosition(zone: "notes") == nil)

            // Bob's own zones have their own quota; a small push of alice's still fits.
            try await client.createZone("mine", as: Token.bob)
            #expect(try await client.push("mine", [bulky(tablet, 1, bytes: 20_000)], as: Token.bob).status == .ok)
            #expect(try await client.push("notes", [bulky(phone, sequence, bytes: 500)]).status == .ok)
            // Every accepted transaction, and only those, is in the zone.
            #expect(try pulledTransactions(try await client.pull("notes")).count == accepted + 1)
        }
        // The counter is rebuilt from the files on open, to the same number.
        let reopened = try EmbeddedZoneStorage(directory: server.directory.sub("data"))
        let measured = try await reopened.storedBytes(owner: "alice")
        try await reopened.close()
        #expect(measured > 24_000 && measured < 40_000, "\(measured)")
    }

    @Test("deleting a zone gives its bytes back to the owner's stored-bytes quota, also after a reopen")
    func deletedZoneFreesQuota() async throws {
        var limits = ServerConfiguration.Limits()
        limits.maxStoredBytesPerUser = 40_000
        let server = try TestServer(limits: limits)
        let phone = ReplicaID.random()
        let tablet = ReplicaID.random()
        try await server.test { client in
            try await client.createZone("notes")
            try await client.createZone("more")
            for sequence in 1...3 as ClosedRange<UInt64> {
                #expect(try await client.push("notes", [bulky(phone, sequence, bytes: 8_000)]).status == .ok)
            }
            // Full: 20 KB more do not fit anywhere of alice's.
            #expect(try await client.push("more", [bulky(tablet, 1, bytes: 20_000)]).status == .forbidden)
            #expect(try await client.execute(uri: "/v1/zones/notes", method: .delete, headers: auth(Token.alice)).status == .noContent)
            #expect(try await server.storage.storedBytes(owner: "alice") < 1_000)
            // The freed bytes take the push that was refused.
            #expect(try await client.push("more", [bulky(tablet, 1, bytes: 20_000)]).status == .ok)
        }
        let reopened = try EmbeddedZoneStorage(directory: server.directory.sub("data"))
        let measured = try await reopened.storedBytes(owner: "alice")
        try await reopened.close()
        #expect(measured > 20_000 && measured < 24_000, "\(measured)")
    }

    @Test("the stored-bytes counter follows appends exactly and is rebuilt to the same number on open; 0 means unlimited")
    func counterRebuilt() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.sub("data"))
        _ = try await storage.createZone("notes", access: .private, grants: [:])
        _ = try await storage.createZone(ZoneID(owner: "bob", name: "notes"), access: .private, grants: [:])
        let replica = ReplicaID.random()
        for sequence in 1...20 as ClosedRange<UInt64> {
            _ = try await storage.append(zone: "notes", user: "alice", replica: replica,
                                         transactions: [pushed(bulky(replica, sequence, bytes: 3_000))], storedBytesLimit: 0)
        }
        let counted = try await storage.storedBytes(owner: "alice")
        let bob = try await storage.storedBytes(owner: "bob")
        try await storage.close()
        let reopened = try EmbeddedZoneStorage(directory: dir.sub("data"))
        #expect(try await reopened.storedBytes(owner: "alice") == counted)
        #expect(try await reopened.storedBytes(owner: "bob") == bob)
        #expect(counted > 60_000 && bob < 1_000, "\(counted) \(bob)")
        // A compaction rewrites the zone's files: the counter is measured again.
        _ = try await reopened.compact(zone: "notes", retaining: 0)
        let compacted = try await reopened.storedBytes(owner: "alice")
        try await reopened.close()
        let again = try EmbeddedZoneStorage(directory: dir.sub("data"))
        #expect(try await again.storedBytes(owner: "alice") == compacted)
        try await again.close()
    }
}
