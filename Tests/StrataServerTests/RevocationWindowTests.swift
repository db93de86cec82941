import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
import StrataProtocol
@testable import StrataServer
import StrataTestSupport
import Synchronization
import Testing
import StrataCore

/// A grant revoked in the window between a push's route check (the server looking the zone up
/// and finding the pusher allowed) and its append: the storage decides under the append's lock,
/// so the push is refused. Forced here by a storage that revokes the grant as the append arrives,
/// through a live server, on every backend.
@Suite("a revocation between a push's route check and its append")
struct RevocationWindowTests {
    /// The real storage, revoking Bob's grant once as an append arrives, when armed; it records
    /// whether the server's lookups before that saw Bob allowed to push.
    final class RevokingStorage: ZoneStorage {
        let base: any ZoneStorage
        let armed = Mutex(false)
        /// Revokes as a read arrives instead (a pull's), taking every grant away.
        let armedOnRead = Mutex(false)
        let revocations = Mutex(0)
        /// Lookups of the zone that found Bob allowed to push.
        let allowedLookups = Mutex(0)
        /// ``allowedLookups`` when the grant was revoked.
        let lookupsBeforeRevoking = Mutex(0)

        init(base: any ZoneStorage) {
            self.base = base
        }

        private func revokeIfArmed(_ id: ZoneID) async throws(ZoneStorageError) {
            guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
            lookupsBeforeRevoking.withLock { $0 = allowedLookups.withLock { $0 } }
            _ = try await base.updateZone(id, access: .shared, grants: ["bob": .read])
            revocations.withLock { $0 += 1 }
        }

        func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction]) async throws(ZoneStorageError) -> AppendOutcome {
            try await revokeIfArmed(zone)
            return try await base.append(zone: zone, user: user, replica: replica, transactions: transactions)
        }

        func append(zone: ZoneID, user: String, replica: ReplicaID, transactions: [PushedTransaction],
                    storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AppendOutcome {
            try await revokeIfArmed(zone)
            return try await base.append(zone: zone, user: user, replica: replica, transactions: transactions, storedBytesLimit: storedBytesLimit)
        }

        func zone(_ id: ZoneID) async throws(ZoneStorageError) -> ZoneInfo? {
            let info = try await base.zone(id)
            if info?.canPush("bob") == true { allowedLookups.withLock { $0 += 1 } }
            return info
        }

        func createZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            try await base.createZone(id, access: access, grants: grants)
        }
        func zones() async throws(ZoneStorageError) -> [ZoneInfo] { try await base.zones() }
        func setMinSchemaVersion(_ id: ZoneID, _ version: Int) async throws(ZoneStorageError) -> ZoneInfo {
            try await base.setMinSchemaVersion(id, version)
        }
        func updateZone(_ id: ZoneID, access: ZoneAccess, grants: [String: ZoneGrant]) async throws(ZoneStorageError) -> ZoneInfo {
            try await base.updateZone(id, access: access, grants: grants)
        }
        func deleteZone(_ id: ZoneID) async throws(ZoneStorageError) { try await base.deleteZone(id) }
        func storedBytes(owner: String) async throws(ZoneStorageError) -> Int64 { try await base.storedBytes(owner: owner) }
        func read(zone: ZoneID, epoch: UInt64?, after position: UInt64, limit: Int) async throws(ZoneStorageError) -> ReadResult {
            if armedOnRead.withLock({ armed in defer { armed = false }; return armed }) {
                _ = try await base.updateZone(zone, access: .shared, grants: [:])
                revocations.withLock { $0 += 1 }
            }
            return try await base.read(zone: zone, epoch: epoch, after: position, limit: limit)
        }
        func endPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 { try await base.endPosition(zone: zone) }
        func startPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64 { try await base.startPosition(zone: zone) }
        func replicas(zone: ZoneID) async throws(ZoneStorageError) -> [ReplicaInfo] { try await base.replicas(zone: zone) }
        func acknowledged(zone: ZoneID, replica: ReplicaID) async throws(ZoneStorageError) -> UInt64 {
            try await base.acknowledged(zone: zone, replica: replica)
        }
        func compact(zone: ZoneID, retaining: UInt64) async throws(ZoneStorageError) -> ZoneSnapshot {
            try await base.compact(zone: zone, retaining: retaining)
        }
        func mergeState(zone: ZoneID, user: String, replica: ReplicaID?, claim: UInt64, state: StateUpload, basis: UInt64?) async throws(ZoneStorageError) -> StateMergeOutcome {
            try await base.mergeState(zone: zone, user: user, replica: replica, claim: claim, state: state, basis: basis)
        }
        func fingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
            try await base.fingerprint(zone: zone, at: position)
        }
        func lastTransactionFingerprint(zone: ZoneID, at position: UInt64) async throws(ZoneStorageError) -> UInt64? {
            try await base.lastTransactionFingerprint(zone: zone, at: position)
        }
        func snapshotPosition(zone: ZoneID) async throws(ZoneStorageError) -> UInt64? { try await base.snapshotPosition(zone: zone) }
        func snapshot(zone: ZoneID) async throws(ZoneStorageError) -> ZoneSnapshot? { try await base.snapshot(zone: zone) }
        func close() async throws(ZoneStorageError) { try await base.close() }

        /// Revokes every grant as an asset's manifest or chunk is read, when armed.
        let armedOnAssetRead = Mutex(false)
        private func revokeOnAssetRead(_ zone: ZoneID) async throws(ZoneStorageError) {
            guard armedOnAssetRead.withLock({ armed in defer { armed = false }; return armed }) else { return }
            _ = try await base.updateZone(zone, access: .shared, grants: [:])
            revocations.withLock { $0 += 1 }
        }
        func heldAsset(zone: ZoneID, sha256: AssetHash) async throws(ZoneStorageError) -> AssetManifest? {
            try await revokeOnAssetRead(zone)
            return try await base.heldAsset(zone: zone, sha256: sha256)
        }
        func assetChunk(zone: ZoneID, sha256: AssetHash, index: Int) async throws(ZoneStorageError) -> [UInt8]? {
            try await revokeOnAssetRead(zone)
            return try await base.assetChunk(zone: zone, sha256: sha256, index: index)
        }
        func unheldAssets(zone: ZoneID, user: String, assets: Set<AssetHash>) async throws(ZoneStorageError) -> [AssetHash] {
            try await base.unheldAssets(zone: zone, user: user, assets: assets)
        }
        func beginAssetUpload(zone: ZoneID, user: String, manifest: AssetManifest, storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
            try await base.beginAssetUpload(zone: zone, user: user, manifest: manifest, storedBytesLimit: storedBytesLimit)
        }
        func putAssetChunk(zone: ZoneID, user: String, sha256: AssetHash, index: Int, bytes: [UInt8], storedBytesLimit: Int64?) async throws(ZoneStorageError) -> AssetUploadState {
            try await base.putAssetChunk(zone: zone, user: user, sha256: sha256, index: index, bytes: bytes, storedBytesLimit: storedBytesLimit)
        }
    }

    @Test("Bob's read of an asset's manifest or chunk, allowed when the server looked the zone up and revoked while the storage read it, is refused with 403 forbidden and reveals none of its bytes",
          arguments: StorageBackend.allCases)
    func revokedWhileReadingAnAsset(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { base in
            let storage = RevokingStorage(base: base)
            let users = try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol])
            let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
            let secret = Array("the secret photo's bytes, 1234567890".utf8)
            let hash = AssetHash.of(secret)
            try await app.buildApplication().test(.live) { client in
                try await client.createZone("board", #"{"access": "shared", "grants": {"bob": "read"}}"#)
                let manifest = try AssetManifest(sha256: hash, byteCount: UInt64(secret.count), chunks: [hash])
                _ = try await base.beginAssetUpload(zone: "board", user: "alice", manifest: manifest, storedBytesLimit: nil)
                #expect(try await base.putAssetChunk(zone: "board", user: "alice", sha256: hash, index: 0, bytes: secret, storedBytesLimit: nil).complete)
                let allowed = try await client.execute(uri: zoneURI("alice/board", "/assets/\(hash.hex)/chunks/0"), method: .get, headers: auth(Token.bob))
                #expect(allowed.status == .ok && Array(buffer: allowed.body) == secret)
                for suffix in ["/assets/\(hash.hex)", "/assets/\(hash.hex)/chunks/0"] {
                    _ = try await base.updateZone("board", access: .shared, grants: ["bob": .read])
                    storage.armedOnAssetRead.withLock { $0 = true }
                    let refused = try await client.execute(uri: zoneURI("alice/board", suffix), method: .get, headers: auth(Token.bob))
                    #expect(refused.status == .forbidden, "\(suffix): \(String(buffer: refused.body))")
                    #expect(!String(buffer: refused.body).contains("secret"), "the refusal revealed the asset")
                }
            }
        }
    }

    @Test("Bob's push, allowed when the server looked the zone up and revoked before it is appended, is refused with 403 forbidden and appends nothing; his earlier push landed, and the owner's still does",
          arguments: StorageBackend.allCases)
    func revokedBetweenCheckAndAppend(_ backend: StorageBackend) async throws {
        let site = try StorageSite(backend)
        let base = try await site.open()
        let storage = RevokingStorage(base: base)
        let users = try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol])
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
        let bobs = ReplicaID.random()
        do {
            try await app.buildApplication().test(.live) { client in
                try await client.createZone("board", #"{"access": "shared", "grants": {"bob": "readWrite"}}"#)
                // A first push lands (on PostgreSQL it leaves the basis the next push starts from,
                // decided while Bob could push).
                let first = try await client.push("alice/board", [transaction(bobs, 1...1)], as: Token.bob)
                #expect(first.status == .ok, "\(String(buffer: first.body))")
                storage.allowedLookups.withLock { $0 = 0 }
                storage.armed.withLock { $0 = true }
                let refused = try await client.push("alice/board", [transaction(bobs, 2...2)], as: Token.bob)
                #expect(storage.revocations.withLock { $0 } == 1, "the grant was revoked as the append arrived")
                #expect(storage.lookupsBeforeRevoking.withLock { $0 } >= 1, "the server's route check found Bob allowed")
                #expect(refused.status == .forbidden, "\(String(buffer: refused.body))")
                #expect(try errorBody(refused).code == "forbidden")
                // The owner's push still lands, right after Bob's first.
                let owners = ReplicaID.random()
                #expect(try await client.push("board", [transaction(owners, 1...1)]).status == .ok)
            }
            #expect(try await base.endPosition(zone: "board") == 2)
            #expect(try await base.acknowledged(zone: "board", replica: bobs) == 1)
            #expect(try await base.zone("board")?.grants == ["bob": .read])
            try await base.close()
        } catch {
            try? await base.close()
            throw error
        }
    }

    @Test("Bob's pull, allowed when the server looked the zone up and revoked before its page is read, is refused with 403 forbidden and reveals nothing of the page",
          arguments: StorageBackend.allCases)
    func revokedBetweenCheckAndRead(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { base in
            let storage = RevokingStorage(base: base)
            let users = try UserDirectory(tokens: ["alice": Token.alice, "bob": Token.bob, "carol": Token.carol])
            let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
            try await app.buildApplication().test(.live) { client in
                try await client.createZone("board", #"{"access": "shared", "grants": {"bob": "read"}}"#)
                #expect(try await client.push("board", [transaction(ReplicaID.random(), 1...1, title: "secret")]).status == .ok)
                storage.armedOnRead.withLock { $0 = true }
                let refused = try await client.pull("alice/board", as: Token.bob)
                #expect(storage.revocations.withLock { $0 } == 1, "the grant was revoked as the read arrived")
                #expect(refused.status == .forbidden, "\(String(buffer: refused.body))")
                #expect(!String(buffer: refused.body).contains("secret"), "the refusal revealed the page")
            }
        }
    }

    @Test("a push or a state upload for a zone's previous life — the zone deleted and created again while its body arrived — is refused with zoneReset and stores nothing; the same for the new life lands",
          arguments: StorageBackend.allCases)
    func appendIntoPreviousLife(_ backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let old = try await storage.createZone("board", access: .shared, grants: ["bob": .readWrite])
            let bobs = ReplicaID.random()
            _ = try await storage.append(zone: "board", epoch: old.epoch, user: "bob", replica: bobs, transactions: [try pushed(transaction(bobs, 1...1))],
                                         storedBytesLimit: nil)
            try await storage.deleteZone("board")
            let new = try await storage.createZone("board", access: .shared, grants: ["bob": .readWrite])
            #expect(new.epoch != old.epoch)
            // Bob's device of the old life pushes on, for the epoch it looked up.
            let stale = ReplicaID.random()
            await #expect { _ = try await storage.append(zone: "board", epoch: old.epoch, user: "bob", replica: stale, transactions: [try pushed(transaction(stale, 1...1))],
                                                         storedBytesLimit: nil) } throws: { ($0 as? ZoneStorageError)?.code == .zoneReset }
            #expect(try await storage.endPosition(zone: "board") == 0, "the previous life's push landed in the new zone")
            // Its state upload likewise.
            func state() throws -> StateUpload {
                let builder = ProjectionBuilder()
                try builder.apply(encoded: transaction(stale, 1...1, title: "old life").encoded())
                return try StateUpload(payload: builder.snapshotPayload())
            }
            await #expect { _ = try await storage.mergeState(zone: "board", epoch: old.epoch, user: "bob", replica: nil, claim: 0, state: try state(), basis: nil) }
                throws: { ($0 as? ZoneStorageError)?.code == .zoneReset }
            #expect(try await storage.snapshotPosition(zone: "board") == nil, "the previous life's state was merged into the new zone")
            let outcome = try await storage.append(zone: "board", epoch: new.epoch, user: "bob", replica: stale, transactions: [try pushed(transaction(stale, 1...1))],
                                                   storedBytesLimit: nil)
            #expect(outcome.epoch == new.epoch && outcome.position == 1)
        }
    }
}
