import Foundation
@_spi(StrataInternals) public import Strata
import StrataCore

/// The recipe of `Fixtures/divergent/`: two device stores with the same history up to a point,
/// then each missing some of the other's events (see Fixtures/README.md).
///
/// Replica and object IDs and the clock are fixed, so every event — its ID, HLC and content — is
/// the same each time the recipe runs; only the log's random ID and the times the devices stored
/// each record differ between runs.
///
/// The story:
/// 1. Device A creates a folder "Home" with three notes and a tag, then renames "Recipes".
/// 2. B and a third device C receive all of it; B compacts (its early segments retire).
/// 3. Offline, A renames "Shopping" to "Shopping: milk" and pins "Old idea"; B renames
///    "Shopping" to "Shopping: bread" and deletes "Old idea"; C adds a note "From the tablet",
///    which reaches B only.
/// 4. A receives B's delete but not B's rename (a gap in what A has of B).
///
/// So: A lacks B's rename and C's note; B lacks A's rename and pin; the first divergent event is
/// A's rename (the earliest of them); "Shopping"'s title differs (A: A's rename, B: B's rename);
/// "From the tablet" exists in B only; "Old idea" is deleted on both.
public enum DivergentStores {
    public static let replicaA = ReplicaID(rawValue: 0xA1A1_0000_0000_0000_0000_0000_0000_0001)
    public static let replicaB = ReplicaID(rawValue: 0xB2B2_0000_0000_0000_0000_0000_0000_0002)
    public static let replicaC = ReplicaID(rawValue: 0xC3C3_0000_0000_0000_0000_0000_0000_0003)
    public static let folder = ObjectID(rawValue: 0xF01DE400_0000_4000_8000_0000_0000_0001)
    public static let shopping = ObjectID(rawValue: 0x5A0991A6_0000_4000_8000_0000_0000_0002)
    public static let oldIdea = ObjectID(rawValue: 0x01D1DEA0_0000_4000_8000_0000_0000_0003)
    public static let recipes = ObjectID(rawValue: 0x4EC19E50_0000_4000_8000_0000_0000_0004)
    public static let fromTablet = ObjectID(rawValue: 0x7AB1E700_0000_4000_8000_0000_0000_0005)
    public static let errand = ObjectID(rawValue: 0xE4A4D000_0000_4000_8000_0000_0000_0006)
    /// 2026-01-01T09:00:00Z, where the devices' clocks start.
    public static let start: UInt64 = 1_767_258_000_000

    public static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("pinned", .bool, default: false)],
               relationships: [Relationship("folder", to: "Folder", inverse: "notes"), Relationship("tags", to: "Tag", toMany: true)])
        Entity("Tag", attributes: [Attribute("label", .string, optional: false)])
    }

    /// A wall clock the recipe moves by hand.
    final class ManualClock: @unchecked Sendable {
        private let lock = NSLock()
        private var milliseconds = DivergentStores.start
        func now() -> UInt64 { lock.lock(); defer { lock.unlock() }; return milliseconds }
        func advance(seconds: UInt64) { lock.lock(); milliseconds += seconds * 1000; lock.unlock() }
    }

    /// Writes `device-a` and `device-b` under `directory` (replacing what is there) and returns
    /// their paths.
    @discardableResult
    public static func write(into directory: String) async throws -> (a: String, b: String) {
        let a = directory + "/device-a"
        let b = directory + "/device-b"
        let c = NSTemporaryDirectory() + "strata-divergent-c-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: c) }
        for path in [a, b] { try? FileManager.default.removeItem(atPath: path) }
        let clock = ManualClock()
        func options(_ replica: ReplicaID, segmentSize: Int) -> StoreOptions {
            var options = StoreOptions(durability: .groupCommit)
            options.newReplicaID = replica
            options.clock = { clock.now() }
            options.segmentSize = segmentSize
            return options
        }
        let deviceA = try await Store.open(at: a, schema: schema, options: options(replicaA, segmentSize: 64 << 20))
        // B's small segments (the minimum) let its compaction retire some of them.
        let deviceB = try await Store.open(at: b, schema: schema, options: options(replicaB, segmentSize: 4096))
        let deviceC = try await Store.open(at: c, schema: schema, options: options(replicaC, segmentSize: 64 << 20))
        /// Sends `from`'s transactions not yet sent to `to` (all of them, or only some).
        func deliver(_ from: Store, to: Store, only: ((TransactionRecord) -> Bool)? = nil) async throws {
            let records = try from.transactions(forSync: true).map(\.transaction).filter { $0.replica == from.replicaID }
            let chosen = only.map { records.filter($0) } ?? records
            // One at a time: one log record each, as a device pulling often would store them.
            for record in chosen { _ = try await to.applyRemote([record]) }
        }

        // 1. Shared history.
        clock.advance(seconds: 60)
        try await deviceA.transaction { tx in
            try tx.insert("Folder", id: folder, ["name": "Home"])
            try tx.insert("Note", id: shopping, ["title": "Shopping", "folder": .reference(folder)])
            try tx.insert("Note", id: oldIdea, ["title": "Old idea", "folder": .reference(folder)])
            try tx.insert("Note", id: recipes, ["title": "Recipes", "folder": .reference(folder)])
            try tx.insert("Tag", id: errand, ["label": "errand"])
            try tx.add(shopping, "tags", errand)
        }
        clock.advance(seconds: 60)
        try await deviceA.transaction { tx in try tx.update(recipes, ["title": "Recipes & menus"]) }
        // Enough history for B's log to span several segments.
        for i in 1...40 {
            clock.advance(seconds: 5)
            try await deviceA.transaction { tx in
                try tx.insert("Tag", id: ObjectID(rawValue: 0x7A900000_0000_4000_8000_0000_0000_0000 + UInt128(i)), ["label": .string("label number \(i) of the shared history, long enough to fill segments")])
            }
        }
        clock.advance(seconds: 60)
        try await deliver(deviceA, to: deviceB)
        try await deliver(deviceA, to: deviceC)
        try await deliver(deviceB, to: deviceA)
        try await deliver(deviceC, to: deviceB)
        try await deliver(deviceC, to: deviceA)
        _ = try await deviceB.compact()

        // 2. Offline edits.
        clock.advance(seconds: 3600)
        try await deviceA.transaction { tx in try tx.update(shopping, ["title": "Shopping: milk"]) }
        clock.advance(seconds: 60)
        try await deviceB.transaction { tx in try tx.update(shopping, ["title": "Shopping: bread"]) }
        clock.advance(seconds: 60)
        try await deviceC.transaction { tx in try tx.insert("Note", id: fromTablet, ["title": "From the tablet", "folder": .reference(folder)]) }
        clock.advance(seconds: 60)
        try await deviceA.transaction { tx in try tx.update(oldIdea, ["pinned": true]) }
        clock.advance(seconds: 60)
        try await deviceB.transaction { tx in try tx.delete(oldIdea) }

        // 3. Partial exchange: C's note reaches B; B's delete (not its rename) reaches A.
        clock.advance(seconds: 60)
        let sequencesBefore = try deviceB.transactions(forSync: true).map(\.transaction).filter { tx in
            tx.replica == replicaB && tx.events.contains { if case .delete = $0.change { true } else { false } }
        }
        try await deliver(deviceC, to: deviceB, only: { $0.events.contains { $0.change.object == fromTablet } })
        _ = try await deviceA.applyRemote(sequencesBefore)

        for store in [deviceA, deviceB, deviceC] { try await store.close() }
        // The lock files are recreated by whoever opens a store; they are not part of a fixture.
        for path in [a, b] { try? FileManager.default.removeItem(atPath: Store.logDirectory(ofStoreAt: path) + "/LOCK") }
        return (a, b)
    }
}
