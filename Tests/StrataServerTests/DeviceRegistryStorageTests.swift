import StrataCore
import StrataProtocol
@testable import StrataServer
import Testing

/// The device registry as each storage keeps it: entries by user and replica, the bounds per user
/// and per zone's life, expiry of devices not seen for long, and nothing of a deleted zone's.
@Suite("Device registry storage: bounded, expiring, per zone life")
struct DeviceRegistryStorageTests {
    static let backends: [StorageBackend] = [.embedded, .postgres]

    func entry(_ replica: ReplicaID, user: String, at lastSeen: UInt64, check: DeviceStateCheck = .consistent) -> DeviceEntry {
        DeviceEntry(replica: replica.description, user: user, lastSeen: lastSeen, token: "t", position: 0, digest: nil, pendingTransactions: 0,
                    pendingAssets: 0, masked: false, library: StrataLibraryVersion.current, schemaVersion: nil, check: check, reason: nil, zoneDigest: nil)
    }

    @Test("a user keeps at most its bound; a device not seen for 90 days goes; another user's entry under the same replica stays; a new life of the zone starts empty",
          arguments: backends)
    func bounds(backend: StorageBackend) async throws {
        try await withStorage(backend) { storage in
            let zone = try await storage.createZone(name: "notes", owner: "alice", access: .shared, grants: ["bob": .read])
            let day: UInt64 = 86_400_000
            let start: UInt64 = 2_000_000_000_000
            let shared = ReplicaID.random()
            try await storage.recordDevice(entry(shared, user: "alice", at: start, check: .divergent), zone: zone.id, epoch: zone.epoch, maxPerUser: 3)
            try await storage.recordDevice(entry(shared, user: "bob", at: start + 1), zone: zone.id, epoch: zone.epoch, maxPerUser: 3)
            #expect(try await storage.divergentDeviceCount() == 1)
            // Bob's fourth device pushes out his least recently seen; Alice's entry is not his.
            var bobs: [ReplicaID] = [shared]
            for i in 0..<3 {
                let replica = ReplicaID.random()
                bobs.append(replica)
                try await storage.recordDevice(entry(replica, user: "bob", at: start + 2 + UInt64(i)), zone: zone.id, epoch: zone.epoch, maxPerUser: 3)
            }
            let listed = try await storage.devices(zone: zone.id)
            #expect(Set(listed.filter { $0.user == "bob" }.map(\.replica)) == Set(bobs.dropFirst().map(\.description)))
            #expect(listed.filter { $0.user == "alice" }.map(\.replica) == [shared.description])
            // 91 days later, one report: everything not seen since is gone, the divergent one too.
            let late = ReplicaID.random()
            try await storage.recordDevice(entry(late, user: "bob", at: start + 91 * day), zone: zone.id, epoch: zone.epoch, maxPerUser: 3)
            #expect(try await storage.devices(zone: zone.id).map(\.replica) == [late.description])
            #expect(try await storage.divergentDeviceCount() == 0)
            // Another life: a report naming the old one is refused; the registry starts empty.
            try await storage.deleteZone(zone.id)
            let again = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
            #expect(try await storage.devices(zone: again.id).isEmpty)
            await #expect(throws: ZoneStorageError.self) {
                try await storage.recordDevice(entry(late, user: "alice", at: start + 92 * day), zone: again.id, epoch: zone.epoch, maxPerUser: 3)
            }
        }
    }
}
