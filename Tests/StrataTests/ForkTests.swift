import Foundation
import Synchronization
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// `Store.fork`: the abandoned transactions re-authored under a new replica, the projection equal
/// to a replay of the history as it now stands, and the old replica's later events (the other
/// copy's, from the server) applying normally.
@Suite("Replica fork")
struct ForkTests {
    /// Every object as readers see it (values and to-many sets): what a fork must not change
    /// when nothing raced (the digest also covers which event set each value, which a fork does
    /// change).
    func visibleState(_ store: Store) -> [ObjectSnapshot] {
        store.allObjectIDs().compactMap { store.object($0) }
    }

    func lastSequence(_ t: TransactionRecord) -> UInt64 { t.sequences?.upperBound ?? 0 }

    @Test("Property: a fork at a random keptThrough equals a replay of the kept and re-authored history")
    func forkProperty() async throws {
        for seed in propertySeeds() {
            try await forkProperty(seed: seed)
        }
    }

    func forkProperty(seed: UInt64) async throws {
        var history = RandomHistory(seed: seed)
        let dir = StoreDirectory()
        let clock = ManualClock()
        var options = storeOptions(clock: clock)
        options.newReplicaID = ReplicaID(rawValue: 1)
        let store = try await Store.open(at: dir.sub("s"), schema: notesSchema, options: options)
        // Another replica whose transactions are mixed in; its clock runs apart, so that its
        // stamps rarely tie with the store's.
        let otherClock = ManualClock()
        otherClock.advance(7919)
        var otherOptions = storeOptions(clock: otherClock)
        otherOptions.newReplicaID = ReplicaID(rawValue: 2)
        let other = try await Store.open(at: dir.sub("o"), schema: notesSchema, options: otherOptions)
        var sent = 0
        for _ in 0..<(30 + Int(history.rng.next() % 30)) {
            clock.advance(1 + history.rng.next() % 3)
            if history.chance(20) {
                otherClock.advance(1 + history.rng.next() % 3)
                await history.step(other)
                let own = try other.transactions().map(\.transaction).filter { $0.replica == other.replicaID }
                try await store.applyRemote(Array(own.dropFirst(sent)))
                sent = own.count
            } else {
                await history.step(store)
            }
        }
        let old = store.replicaID
        let before = try store.transactions()
        let ownHighest = before.map(\.transaction).filter { $0.replica == old }.map(lastSequence).max() ?? 0
        let keptThrough = history.rng.next() % (ownHighest + 1)
        let abandoned = before.filter { $0.transaction.replica == old && lastSequence($0.transaction) > keptThrough }
        let kept = before.filter { !($0.transaction.replica == old && lastSequence($0.transaction) > keptThrough) }
        let visibleBefore = visibleState(store)
        let abandonedStamps = Set(abandoned.flatMap(\.transaction.events).map(\.hlc))
        let raced = before.contains { $0.transaction.replica != old && $0.transaction.events.contains { abandonedStamps.contains($0.hlc) } }

        let fork = try await store.fork(keepingThrough: keptThrough)
        let context = "seed \(seed), keptThrough \(keptThrough) of \(ownHighest)"
        #expect(fork.replica == old && fork.successor == store.replicaID && fork.successor != old, "\(context)")
        #expect(fork.keptThrough == keptThrough, "\(context)")
        #expect(store.identity.lineage == [fork], "\(context)")
        let after = try store.transactions()
        let reauthored = after.map(\.transaction).filter { $0.replica == fork.successor }
        #expect(UInt64(reauthored.flatMap(\.events).count) == fork.reauthored, "\(context)")
        #expect(fork.reauthored == UInt64(abandoned.flatMap(\.transaction.events).count), "\(context)")
        #expect(reauthored.flatMap(\.events).map(\.id.sequence) == Array(0..<fork.reauthored).map { $0 + 1 },
                "\(context): re-authored sequences are consecutive from 1")
        #expect(!after.contains { $0.transaction.replica == old && lastSequence($0.transaction) > keptThrough },
                "\(context): history no longer holds abandoned transactions")
        #expect(zip(abandoned, reauthored).allSatisfy { $0.transaction.events.map(\.hlc) == $1.events.map(\.hlc) }, "\(context): HLCs kept")

        // The projection is a replay of the kept originals plus the re-authored ones.
        let digest = store.digest()
        #expect(try replayDigest(kept.map(\.transaction) + reauthored) == digest, "\(context)")
        #expect(try replayDigest(after.map(\.transaction)) == digest, "\(context)")
        if !raced {
            #expect(visibleState(store) == visibleBefore, "\(context): a fork changed what readers see")
        }
        // Removes name only adds that exist: in the history now, or held by the server (≤ keptThrough).
        let held = Set(before.flatMap(\.transaction.events).filter { $0.id.replica == old && $0.id.sequence <= keptThrough }.map(\.id))
        let adds = Set(after.flatMap(\.transaction.events).compactMap { event -> EventID? in
            if case .add = event.change { return event.id } else { return nil }
        }).union(held)
        for event in after.flatMap(\.transaction.events) {
            if case .remove(_, _, _, _, let named) = event.change {
                #expect(named.allSatisfy(adds.contains), "\(context): a remove names an add that does not exist: \(named)")
            }
        }
        // New commits continue the successor's sequences.
        await history.step(store)
        let next = try store.transactions().last?.transaction
        if let next, next.replica == fork.successor, next.sequences != reauthored.last?.sequences {
            #expect(next.sequences?.lowerBound == fork.reauthored + 1, "\(context)")
        }
        let digestAfterStep = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.sub("s"), schema: notesSchema, options: options)
        #expect(reopened.digest() == digestAfterStep, "\(context): reopening gives another projection")
        #expect(reopened.replicaID == fork.successor, "\(context)")
        try await reopened.close()
        try await other.close()
    }

    @Test("After a fork, the old replica's events above keptThrough from the other copy apply normally")
    func otherCopyApplies() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        for name in ["a", "b", "c", "d"] {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string(name)]) }
        }
        let old = store.replicaID
        let keptThrough: UInt64 = 2  // the schema event and folder a
        try await store.fork(keepingThrough: keptThrough)
        #expect(store.fetch("Folder").count == 4, "the abandoned folders are re-authored")
        // The other copy's sequences 3 and 4 of the old replica, as the server holds them.
        let theirs = ObjectID()
        let other = TransactionRecord(replica: old, events: [
            Event(id: EventID(replica: old, sequence: 3), hlc: HLC(milliseconds: 1_800_000_000_000, counter: 0),
                  change: .insert(entity: "Folder", object: theirs, fields: ["name": "theirs"])),
            Event(id: EventID(replica: old, sequence: 4), hlc: HLC(milliseconds: 1_800_000_000_000, counter: 1),
                  change: .update(entity: "Folder", object: theirs, fields: ["name": "theirs, renamed"])),
        ])
        #expect(try await store.applyRemote([other]) == 2, "they are no longer counted as applied")
        #expect(store.object(theirs)?["name"] == "theirs, renamed")
        #expect(store.fetch("Folder").count == 5)
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(reopened.digest() == digest, "applied after the fork position, they are not abandoned")
        #expect(reopened.object(theirs) != nil)
        try await reopened.close()
    }

    @Test("A fork interrupted after store.json and before the log append is finished on open")
    func interruptedFork() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        var tags: [ObjectID] = []
        let note = try await store.transaction { tx in try tx.insert("Note", ["title": "n"]) }
        for label in ["x", "y", "z"] {
            tags.append(try await store.transaction { tx in try tx.insert("Tag", ["label": .string(label)]) })
        }
        for tag in tags { try await store.transaction { tx in try tx.add(note, "tags", tag) } }
        try await store.transaction { tx in try tx.remove(note, "tags", tags[1]) }
        let visible = visibleState(store)
        let old = store.replicaID
        Store.forkStopsBeforeAppend.withLock { _ = $0.insert(dir.path) }
        defer { Store.forkStopsBeforeAppend.withLock { _ = $0.remove(dir.path) } }
        await #expect(throws: StoreError.self) { try await store.fork(keepingThrough: 3) }
        await #expect(throws: StoreError.self, "the store refuses work until reopened") {
            try await store.transaction { tx in _ = try tx.insert("Tag", ["label": "w"]) }
        }
        try await store.close()
        Store.forkStopsBeforeAppend.withLock { _ = $0.remove(dir.path) }
        let written = try Store.identity(ofStoreAt: dir.path)
        #expect(written.lineage.last?.replica == old)

        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let fork = try #require(reopened.identity.lineage.last)
        #expect(reopened.replicaID == fork.successor)
        let reauthored = try reopened.transactions().map(\.transaction).filter { $0.replica == fork.successor }
        #expect(UInt64(reauthored.flatMap(\.events).count) == fork.reauthored && fork.reauthored > 0)
        #expect(visibleState(reopened) == visible, "the finished fork shows the same objects")
        #expect(reopened.related(note, "tags").map(\.id) == [tags[0], tags[2]].sorted())
        try await reopened.transaction { tx in _ = try tx.insert("Tag", ["label": "w"]) }
        let digest = reopened.digest()
        try await reopened.close()
        let again = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(again.identity.lineage.count == 1, "finished once")
        #expect(again.digest() == digest)
        try await again.close()
    }

    @Test("A re-stamping fork gives the re-authored events fresh, increasing HLCs")
    func restamp() async throws {
        let dir = StoreDirectory()
        let clock = ManualClock()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        for name in ["a", "b"] {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string(name)]) }
        }
        let stamps = try store.transactions().flatMap(\.transaction.events).map(\.hlc)
        clock.advance(60_000)
        let fork = try await store.fork(keepingThrough: 0, reason: .clockRestamp, restamp: true)
        #expect(fork.restamped && fork.reason == .clockRestamp)
        let fresh = try store.transactions().flatMap(\.transaction.events).map(\.hlc)
        #expect(fresh.count == stamps.count)
        #expect(fresh == fresh.sorted())
        #expect(stamps.max().map { newest in fresh.allSatisfy { $0 > newest } } == true)
        #expect(store.fetch("Folder").count == 2)
        try await store.close()
    }

    @Test("A fork whose abandoned transactions were compacted away is refused and changes nothing")
    func retiredHistory() async throws {
        let dir = StoreDirectory()
        var options = storeOptions()
        options.segmentSize = 4096
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        for i in 0..<200 {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": .string("folder \(i) " + String(repeating: "x", count: 40))]) }
        }
        try await store.compact()
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "last"]) }
        #expect(store.segmentLog.startPosition > 0)
        let identity = store.identity
        do {
            try await store.fork(keepingThrough: 1)
            Issue.record("the fork succeeded without the history it re-authors")
        } catch let error as StoreError {
            #expect(error.code == .historyRetired)
        }
        #expect(store.identity == identity)
        #expect(try Store.identity(ofStoreAt: dir.path) == identity)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "still works"]) }
        try await store.close()
    }
}
