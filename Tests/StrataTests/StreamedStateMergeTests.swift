import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// The server merges an uploaded state object by object as it reads it
/// (`ProjectionBuilder.mergedPayload(with:…)`), never decoding it whole: that must give exactly
/// the bytes the whole-state merge gives, whatever the two states hold.
@Suite("Uploaded states merged as they stream")
struct StreamedStateMergeTests {
    @Test("Merging an upload object by object writes the same snapshot, byte for byte, as merging it whole — crediting, withholding and objects on one side only included")
    func streamedEqualsWhole() async throws {
        var credits = 0
        for seed in propertySeeds().prefix(6) {
            var history = RandomHistory(seed: seed)
            let dir = StoreDirectory()
            var optionsA = storeOptions()
            optionsA.newReplicaID = ReplicaID(rawValue: 1)
            var optionsB = storeOptions()
            optionsB.newReplicaID = ReplicaID(rawValue: 2)
            let a = try await Store.open(at: dir.sub("a"), schema: notesSchema, options: optionsA)
            let b = try await Store.open(at: dir.sub("b"), schema: notesSchema, options: optionsB)
            for _ in 0..<10 { await history.step(a) }
            try await b.applyRemote(try a.transactions(forSync: true).map(\.transaction))
            for _ in 0..<20 { await history.step(history.chance(50) ? a : b) }
            // The zone holds a's history and part of b's; the upload is b's whole state, which
            // names a's events the zone holds and b's own, some past b's claim.
            let own = try b.transactions(forSync: true).map(\.transaction).filter { $0.replica == ReplicaID(rawValue: 2) }
            let zoneTransactions = try a.transactions(forSync: true).map(\.transaction) + own.prefix(own.count / 2)
            func zone() throws -> ProjectionBuilder {
                let builder = ProjectionBuilder()
                for transaction in zoneTransactions { try builder.apply(encoded: transaction.encoded()) }
                return builder
            }
            let state = ProjectionBuilder()
            for transaction in try b.transactions(forSync: true) { try state.apply(encoded: transaction.transaction.encoded()) }
            let claim = UInt64(own.count / 3)
            let uploader = ReplicaID(rawValue: 2)
            for withholding in [nil, (replica: uploader, above: claim)] {
                let whole = try zone()
                let outcome = try whole.merge(state, believingApplied: [uploader: claim], withholding: withholding, crediting: 7)
                let streamed = try zone().mergedPayload(with: StateUpload(payload: state.snapshotPayload()), believingApplied: [uploader: claim],
                                                        withholding: withholding, crediting: 7)
                let expected = outcome.changed ? whole.snapshotPayload() : nil
                #expect(streamed.payload == expected,
                        "seed \(seed), withholding \(withholding.map { "\($0.above)" } ?? "nothing"): the streamed merge wrote a different snapshot (\(streamed.payload?.count ?? -1) bytes, the whole merge \(expected?.count ?? -1))")
                if streamed.credited != nil { credits += 1 }
                #expect(streamed.credited?.replica == outcome.credited?.replica && streamed.credited?.count == outcome.credited?.count, "seed \(seed)")
                if let payload = streamed.payload {
                    // What the server writes opens as a store's snapshot would.
                    #expect(try ProjectionBuilder(snapshot: payload).digest() == whole.digest(), "seed \(seed)")
                }
            }
            // An empty zone takes the whole upload (every object new to it, none kept).
            let fresh = try ProjectionBuilder().mergedPayload(with: StateUpload(payload: state.snapshotPayload()), believingApplied: [:], crediting: 7)
            let reference = ProjectionBuilder()
            _ = try reference.merge(state, believingApplied: [:], crediting: 7)
            let same = fresh.payload == reference.snapshotPayload()
            #expect(same, "seed \(seed): merging into an empty zone wrote a different snapshot")
            try await a.close()
            try await b.close()
        }
        #expect(credits > 0, "no seed credited anything: the crediting path went untested")
    }

    @Test("An upload whose objects are out of ID order is refused, naming the object and byte; one with trailing bytes too")
    func outOfOrderRefused() throws {
        let builder = ProjectionBuilder()
        let replica = ReplicaID(rawValue: 9)
        let first = ObjectID(rawValue: 1), second = ObjectID(rawValue: 2)
        let record = TransactionRecord(replica: replica, events: [
            Event(id: EventID(replica: replica, sequence: 1), hlc: HLC(milliseconds: 1_700_000_000_000, counter: 0),
                  change: .insert(entity: "Note", object: first, fields: ["title": .string("one")])),
            Event(id: EventID(replica: replica, sequence: 2), hlc: HLC(milliseconds: 1_700_000_000_001, counter: 0),
                  change: .insert(entity: "Note", object: second, fields: ["title": .string("two")])),
        ])
        try builder.apply(encoded: record.encoded())
        let payload = builder.snapshotPayload()
        let upload = try StateUpload(payload: payload)
        #expect(upload.objectCount == 2)
        #expect(upload.newestTimestamp == HLC(milliseconds: 1_700_000_000_001, counter: 0))
        // Both records are the same length (same layout, one-letter-different titles): swap them.
        let firstAt = try #require(find(first.bytes, in: payload)), secondAt = try #require(find(second.bytes, in: payload))
        let length = secondAt - firstAt
        #expect(payload.count - secondAt == length)
        var swapped = payload
        swapped.replaceSubrange(firstAt..<(firstAt + length), with: payload[secondAt...])
        swapped.replaceSubrange(secondAt..<payload.count, with: payload[firstAt..<secondAt])
        let error = try #require(throws: StoreError.self) { try StateUpload(payload: swapped) }
        #expect(error.code == .corruptSnapshot)
        #expect(error.message.contains("at byte \(secondAt)") && error.message.contains("ascending ID order"), "\(error.message)")
        let trailing = try #require(throws: StoreError.self) { try StateUpload(payload: payload + [0]) }
        #expect(trailing.message.contains("1 trailing bytes"), "\(trailing.message)")
    }

    @Test("An upload naming a removal's sequence past the range of events is refused before any arithmetic on it; one listing names and replicas no object uses leaves them out of the merged state")
    func hostileTablesAndSequences() throws {
        let replica = ReplicaID(rawValue: 77)
        let note = ObjectID(rawValue: 5), tag = ObjectID(rawValue: 6)
        func state(_ removing: [EventID], unused: Int = 0) throws -> [UInt8] {
            let projection = Projection()
            projection.beginBatch(tracking: false)
            try projection.apply(Event(id: EventID(replica: replica, sequence: 1), hlc: HLC(milliseconds: 1_700_000_000_000, counter: 0),
                                       change: .insert(entity: "Note", object: note, fields: ["title": .string("n")])))
            try projection.apply(Event(id: EventID(replica: replica, sequence: 2), hlc: HLC(milliseconds: 1_700_000_000_001, counter: 0),
                                       change: .remove(entity: "Note", object: note, relationship: "tags", target: tag, adds: removing)))
            for index in 0..<unused {
                _ = projection.intern("unused\(index)")
                _ = try projection.internReplica(ReplicaID(rawValue: UInt128(1_000_000 + index)))
            }
            _ = projection.commitBatch(report: false)
            return ProjectionCodec.encode(projection)
        }
        // Two unknown replicas, one removal at the top of UInt64: crediting would add past it.
        let wrapping = try state([EventID(replica: ReplicaID(rawValue: 1), sequence: 1), EventID(replica: ReplicaID(rawValue: 2), sequence: .max)])
        let error = try #require(throws: StoreError.self) { try StateUpload(payload: wrapping) }
        #expect(error.code == .corruptSnapshot && error.message.contains("removes an add of sequence \(UInt64.max)"), "\(error.message)")

        let padded = try StateUpload(payload: state([EventID(replica: ReplicaID(rawValue: 1), sequence: 3)], unused: 2000))
        #expect(padded.replicas.count > 2000 && padded.names.count > 2000)
        let merged = try #require(try ProjectionBuilder().mergedPayload(with: padded, believingApplied: [:], crediting: 7).payload)
        let opened = try ProjectionBuilder(snapshot: merged)
        // The credited replica only: the uploader's names of replica 77 and of replica 1 are
        // all credited (the zone holds neither), and nothing unused was interned.
        #expect(opened.projection.replicas.count == 1, "\(opened.projection.replicas.count) replicas in the merged state")
        #expect(opened.projection.names.count < 10, "\(opened.projection.names.count) names in the merged state")
        #expect(opened.projection.records.count == 1)
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
