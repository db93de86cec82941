import Foundation
import StrataLog
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// Adopting a zone's state (what sync does when a token expired) against everything else a
/// store does at the same time: commits, compactions, a reader in this process.
@Suite("Adopting a state: recorded in the log, never pruned before its record, read by a reader")
struct AdoptionTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: "")])
    }

    /// The adoption records of the store's retained log, each with whether its state is kept.
    func records(_ path: String) throws -> [(AdoptionRecord, kept: Bool)] {
        var found: [(AdoptionRecord, Bool)] = []
        let adopted = AdoptedStates(storeDirectory: path)
        _ = try SegmentLog.verify(at: Store.logDirectory(ofStoreAt: path), record: { record in
            for entry in record.entries where AdoptionRecord.isAdoption(entry.payload) {
                guard let parsed = try? AdoptionRecord(decoding: entry.payload, position: entry.position) else { continue }
                found.append((parsed, (try? adopted.payload(for: parsed, position: entry.position)) != nil))
            }
        })
        return found
    }

    @Test("adoptions racing compactions and commits: every record in the log still has its state, a whole replay gives the store's state, and a reader in step with the writer agrees")
    func adoptionsRaceCompactions() async throws {
        let sourceDir = StoreDirectory(), dir = StoreDirectory()
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 4096  // rollovers, so compactions retire segments holding records
        let source = try await Store.open(at: sourceDir.path, schema: Self.schema, options: options)
        let store = try await Store.open(at: dir.path, schema: Self.schema, options: options)
        let reader = try StoreReader.open(at: dir.path)
        for round in 0..<12 {
            try await source.transaction { tx in
                for i in 0..<5 { _ = try tx.insert("Note", ["title": .string("source \(round).\(i) " + String(repeating: "s", count: 80))]) }
            }
            let payload = try source.statePayload()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await store.adoptSnapshot(payload, origin: "round \(round)") }
                group.addTask { _ = try await store.compact() }
                group.addTask {
                    for i in 0..<4 {
                        try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("local \(round).\(i) " + String(repeating: "l", count: 80))]) }
                    }
                }
                group.addTask { _ = try await store.compact() }
                try await group.waitForAll()
            }
            try reader.refresh()
            #expect(reader.digest() == store.digest(), "round \(round): the reader differs from the writer")
            for (record, kept) in try records(dir.path) {
                #expect(kept, "round \(round): the log names \(record.contentHash) but its state is gone")
            }
        }
        #expect(store.fetch("Note").count == 12 * (5 + 4))
        let digest = store.digest()
        try await store.close()
        try await source.close()
        let reopened = try await Store.open(at: dir.path, schema: Self.schema)
        #expect(reopened.digest() == digest)
        try await reopened.close()
    }
}
