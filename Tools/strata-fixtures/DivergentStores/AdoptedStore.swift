import Foundation
@_spi(StrataInternals) public import Strata
import StrataCore

/// The recipe of `Fixtures/adopted/device-d`: a store that adopted another device's state, as a
/// device whose change token expired adopts its zone's snapshot (see Fixtures/README.md).
///
/// Device D (replica `d4d40000-…`, the clock of ``DivergentStores``) inserts a note "Mine" and
/// edits it; then it adopts the whole state of `divergent/device-a` (A's notes, folder, tags and
/// their provenance), recorded as an adoption record at position 3; then it edits A's "Shopping"
/// note. Its log is never compacted by hand, so the adoption record, the state it names
/// (`adopted/<sha256>.state`) and D's own earlier transactions are all there to replay.
public enum AdoptedStore {
    public static let replicaD = ReplicaID(rawValue: 0xD4D4_0000_0000_0000_0000_0000_0000_0004)
    public static let mine = ObjectID(rawValue: 0xD4D40000_0000_4000_8000_0000_0000_0007)

    /// Writes `device-d` under `directory` (replacing it) from the store at `deviceA`; returns its path.
    @discardableResult
    public static func write(into directory: String, from deviceA: String) async throws -> String {
        let d = directory + "/device-d"
        try? FileManager.default.removeItem(atPath: d)
        let clock = DivergentStores.ManualClock()
        var options = StoreOptions(durability: .groupCommit)
        options.newReplicaID = replicaD
        options.clock = { clock.now() }
        // A copy is opened, never the committed fixture (opening writes a lock file).
        let copy = NSTemporaryDirectory() + "strata-adopted-a-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.copyItem(atPath: deviceA, toPath: copy)
        let source = try await Store.open(at: copy, schema: DivergentStores.schema)
        let state = try source.statePayload()
        try await source.close()
        let device = try await Store.open(at: d, schema: DivergentStores.schema, options: options)
        clock.advance(seconds: 7200)
        try await device.transaction { tx in try tx.insert("Note", id: mine, ["title": "Mine"]) }
        clock.advance(seconds: 60)
        try await device.transaction { tx in try tx.update(mine, ["title": "Mine, edited"]) }
        clock.advance(seconds: 60)
        try await device.adoptSnapshot(state, origin: "zone alice/notes snapshot (fixture: the state of divergent/device-a)")
        clock.advance(seconds: 60)
        try await device.transaction { tx in try tx.update(DivergentStores.shopping, ["title": "Shopping: eggs"]) }
        try await device.close()
        try? FileManager.default.removeItem(atPath: Store.logDirectory(ofStoreAt: d) + "/LOCK")
        return d
    }
}
