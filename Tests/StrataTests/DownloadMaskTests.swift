import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
@testable import StrataCore

@Suite("Download masks: what a server leaves out of a device's pulls and snapshots")
struct DownloadMaskTests {
    @Test("the text form is canonical (sorted, without repeats), reads back, and bad entries are refused naming them")
    func textForm() throws {
        let mask = try DownloadMask(parsing: "Photo.fullImage,Comment,Photo.fullImage,Comment.body")
        #expect(mask.description == "Comment,Photo.fullImage", "an attribute of a masked entity is dropped: the entity is masked whole")
        #expect(try DownloadMask(parsing: mask.description) == mask)
        #expect(try DownloadMask(parsing: "") == .none && DownloadMask.none.description.isEmpty)
        #expect(mask.withholds(entity: "Comment") && mask.withholds("text", of: "Comment"))
        #expect(mask.withholds("fullImage", of: "Photo") && !mask.withholds("caption", of: "Photo") && !mask.withholds(entity: "Photo"))
        #expect(try mask.covers(DownloadMask(attributes: ["Comment": ["x"]])) && !DownloadMask(entities: ["Photo"]).covers(mask))
        for bad in [["a,b"], ["a.b"], [""]] {
            #expect { try DownloadMask(entities: Set(bad)) } throws: { ($0 as? StoreError)?.code == .invalidArgument }
            #expect { try DownloadMask(attributes: ["Note": Set(bad)]) } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        }
        let tooMany = (0...DownloadMask.maxEntries).map { "E\($0)" }.joined(separator: ",")
        for bad in ["Comment,", ",", "a.b.c", ".x", "Photo.", String(repeating: "x", count: DownloadMask.maxNameBytes + 1), tooMany] {
            #expect { try DownloadMask(parsing: bad) } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        }
    }


    @Test("over random histories of 3 replicas: a masked transaction keeps every event's sequence and HLC, holds nothing masked, is byte for byte the same when nothing in it is masked; applying the masked transactions (to a projection, and to a store, reopened) gives the state of the full history with its snapshot masked")
    func maskedHistoryEqualsMaskedState() async throws {
        for seed in propertySeeds() {
            try await maskedHistory(seed: seed)
        }
    }

    func maskedHistory(seed: UInt64) async throws {
        // One entity masked whole, an attribute and a relationship.
        let mask = try DownloadMask(entities: ["Tag"], attributes: ["Note": ["rank", "tags"]])
        var history = RandomHistory(seed: seed)
        let dir = StoreDirectory()
        var stores: [Store] = []
        for r in 0..<3 {
            var options = storeOptions(clock: ManualClock())
            options.newReplicaID = ReplicaID(rawValue: UInt128(r + 1))
            stores.append(try await Store.open(at: dir.sub("r\(r)"), schema: notesSchema, options: options))
        }
        for _ in 0..<80 {
            let r = Int(history.rng.next() % 3)
            await history.step(stores[r])
            if history.chance(30) {
                let to = Int(history.rng.next() % 3)
                let from = (to + 1) % 3
                try await stores[to].applyRemote(try stores[from].transactions(forSync: true).map(\.transaction).filter { $0.replica == stores[from].replicaID })
            }
        }
        let all = try stores.flatMap { store in try store.transactions(forSync: true).map(\.transaction).filter { $0.replica == store.replicaID } }
        var masked: [TransactionRecord] = []
        var maskedBytes: [[UInt8]] = []
        var withheld = 0
        for transaction in all {
            let bytes = EventCodec.encode(transaction)
            let out = try TransactionMask.apply(mask, to: bytes)
            let record = try EventCodec.decode(out, position: nil)
            #expect(record.replica == transaction.replica && record.events.map(\.id) == transaction.events.map(\.id) && record.events.map(\.hlc) == transaction.events.map(\.hlc),
                    "seed \(seed): a masked transaction renumbered or restamped its events")
            for event in record.events {
                switch event.change {
                case .withheld: withheld += 1
                case .insert(let entity, _, let fields), .update(let entity, _, let fields):
                    #expect(entity != "Tag" && (entity != "Note" || fields["rank"] == nil), "seed \(seed): \(event.change) got through the mask")
                case .add(let entity, _, let relationship, _), .remove(let entity, _, let relationship, _, _):
                    #expect(entity != "Tag" && relationship != "tags", "seed \(seed): \(event.change) got through the mask")
                case .delete(let entity, _):
                    #expect(entity != "Tag", "seed \(seed): \(event.change) got through the mask")
                case .schema: break
                }
            }
            let touches = transaction.events.contains { TransactionMask.masked($0.change, by: mask) != $0.change }
            #expect(touches || out == bytes, "seed \(seed): a transaction with nothing masked was re-encoded")
            masked.append(record)
            maskedBytes.append(out)
        }
        #expect(withheld > 0, "seed \(seed): the history had nothing to withhold")

        // The full state, masked as a snapshot would be.
        let full = Projection()
        full.beginBatch()
        for transaction in all { for event in transaction.events { try full.apply(event) } }
        full.commitBatch(report: false)
        let snapshot = try TransactionMask.apply(mask, toSnapshot: ProjectionCodec.encode(full))
        let fromSnapshot = Projection()
        try ProjectionCodec.decode(snapshot, into: fromSnapshot)
        fromSnapshot.schema = fromSnapshot.recordedSchema
        #expect(fromSnapshot.records.values.allSatisfy { fromSnapshot.names[Int($0.entity)] != "Tag" })
        let expected = fromSnapshot.digest()
        #expect(try replayDigest(masked) == expected, "seed \(seed): the masked history and the masked snapshot differ")
        #expect(try TransactionMask.apply(.none, toSnapshot: ProjectionCodec.encode(full)) == ProjectionCodec.encode(full))

        // A store takes the placeholders as any pulled transaction, and replays them on open.
        let device = try await Store.open(at: dir.sub("device"), schema: notesSchema, options: storeOptions())
        for chunk in stride(from: 0, to: maskedBytes.count, by: 5) {
            try await device.applyRemote(encoded: Array(maskedBytes[chunk..<min(chunk + 5, maskedBytes.count)]))
        }
        #expect(device.digest() == expected, "seed \(seed): a store fed the masked transactions differs")
        #expect(device.fetch("Tag").isEmpty)
        try await device.close()
        let reopened = try await Store.open(at: dir.sub("device"), schema: notesSchema, options: storeOptions())
        #expect(reopened.digest() == expected, "seed \(seed): the masked store replayed differently on open")
        try await reopened.close()
        for store in stores { try await store.close() }
    }
}
