import Foundation
import Synchronization
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// What only the embedded storage has: a data directory, its zone directories and its lock.
/// Everything a storage must do is in ``ZoneStorageConformanceTests``, run on every backend.
@Suite("Embedded zone storage")
struct EmbeddedZoneStorageTests {
    let replica = ReplicaID.random()

    @Test("a deleted zone's log directory is removed, and the recreated zone's is named by its new epoch")
    func deletedZoneDirectories() async throws {
        let dir = TemporaryDirectory()
        let epochs = EpochSequence([11, 22])
        let storage = try EmbeddedZoneStorage(directory: dir.path, options: .init(makeEpoch: { epochs.next() }))
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .private, grants: [:])
        _ = try await storage.append(zone: "notes", replica: replica, transactions: [pushed(transaction(replica, 1...1))])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.sub("zones")) == ["notes-000000000000000b"])
        try await storage.deleteZone("notes")
        _ = try await storage.createZone(name: "notes", owner: "alice", access: .public, grants: [:])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.sub("zones")) == ["notes-0000000000000016"])
        try await storage.close()
    }

    @Test("a second storage on the same directory is refused while the first is open, and opens once it is closed")
    func directoryLock() async throws {
        let dir = TemporaryDirectory()
        let storage = try EmbeddedZoneStorage(directory: dir.path)
        #expect(throws: ZoneStorageError.self) { try EmbeddedZoneStorage(directory: dir.path) }
        try await storage.close()
        let again = try EmbeddedZoneStorage(directory: dir.path)
        try await again.close()
    }
}

/// Epochs handed out in order (then 1, 2, 3, …).
final class EpochSequence: Sendable {
    private let state: Mutex<[UInt64]>
    init(_ epochs: [UInt64]) { state = Mutex(epochs) }
    func next() -> UInt64 {
        state.withLock { $0.isEmpty ? UInt64.random(in: 1 ... .max) : $0.removeFirst() }
    }
}
