import Foundation
import Synchronization
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// The hybrid logical clock never wraps, and one far-future remote stamp cannot drag it along.
@Suite("Clock bounds")
struct ClockBoundsTests {
    static let now: UInt64 = 1_700_000_000_000

    @Test("HLC(milliseconds:counter:) saturates instead of wrapping; init(exactly:) refuses")
    func construction() {
        #expect(HLC(milliseconds: HLC.maxMilliseconds + 1, counter: 0) == HLC(rawValue: .max))
        #expect(HLC(milliseconds: .max, counter: 3).milliseconds == HLC.maxMilliseconds)
        #expect(HLC(exactly: HLC.maxMilliseconds + 1, counter: 0) == nil)
        #expect(HLC(exactly: HLC.maxMilliseconds, counter: 7)?.counter == 7)
        #expect(HLC(milliseconds: 5, counter: 9) == HLC(rawValue: 5 << 16 | 9))
    }

    @Test("tick at the maximum throws clockOverflow and never goes backwards")
    func tickAtMaximum() throws {
        var clock = HybridClock(last: HLC(milliseconds: HLC.maxMilliseconds, counter: .max - 1), now: { Self.now })
        #expect(try clock.tick() == HLC(rawValue: .max))
        for _ in 0..<3 {
            #expect(throws: StoreError.self) { try clock.tick() }
            #expect(clock.last == HLC(rawValue: .max))
        }
        do {
            _ = try clock.tick()
        } catch let error as StoreError {
            #expect(error.code == .clockOverflow)
        }
        // A wall clock beyond the representable range is clamped, not wrapped.
        var future = HybridClock(now: { .max })
        #expect(try future.tick().milliseconds == HLC.maxMilliseconds)
        // The counter's end carries into the milliseconds.
        var carry = HybridClock(last: HLC(milliseconds: 10, counter: .max), now: { 0 })
        #expect(try carry.tick() == HLC(milliseconds: 11, counter: 0))
    }

    @Test("observe of HLC(rawValue: .max) moves the clock no further than now + lead")
    func observeBounded() throws {
        let lead = StoreOptions.defaultMaxClockLead
        var clock = HybridClock(now: { Self.now }, maxLead: lead)
        clock.observe(HLC(rawValue: .max))
        #expect(clock.last <= HLC(milliseconds: Self.now + lead, counter: .max))
        #expect(clock.last >= HLC(milliseconds: Self.now + lead, counter: 0))
        let next = try clock.tick()
        #expect(next > clock.last || next == clock.last)
        #expect(next.milliseconds <= Self.now + lead + 1)
        // Near stamps are taken in exactly.
        var near = HybridClock(now: { Self.now }, maxLead: lead)
        near.observe(HLC(milliseconds: Self.now + 10, counter: 4))
        #expect(near.last == HLC(milliseconds: Self.now + 10, counter: 4))
    }

    @Test("A commit after applying an event stamped at the end of time works, and is stamped near now")
    func commitAfterFarFutureEvent() async throws {
        let dir = StoreDirectory()
        let clock = ManualClock()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        let remote = ReplicaID.random()
        let legacy = TransactionRecord(replica: remote, events: [
            Event(id: EventID(replica: remote, sequence: 1), hlc: HLC(rawValue: .max),
                  change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": "from the future"])),
        ])
        #expect(try await store.applyRemote([legacy]) == 1)
        let now = clock.milliseconds.load(ordering: .relaxed)
        for _ in 0..<3 {
            try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "local"]) }
        }
        let stamps = try store.transactions().filter { $0.transaction.replica == store.replicaID }.flatMap(\.transaction.events).map(\.hlc)
        #expect(stamps.count >= 3)
        #expect(stamps.allSatisfy { $0.milliseconds <= now + StoreOptions.defaultMaxClockLead + 1 })
        #expect(stamps == stamps.sorted(), "the clock never goes backwards")
        // The event keeps its stamp (the merge rule orders by it).
        #expect(try store.transactions().contains { $0.transaction.events.contains { $0.hlc == HLC(rawValue: .max) } })
        try await store.close()
        // Reopening does not pull the clock to the far-future stamp either.
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        try await reopened.transaction { tx in _ = try tx.insert("Folder", ["name": "after reopen"]) }
        let last = try reopened.transactions().last?.transaction.events.last?.hlc
        #expect(last.map { $0.milliseconds <= now + StoreOptions.defaultMaxClockLead + 1 } == true)
        try await reopened.close()
    }

    @Test("Reusing the ID of an object deleted far in the future: a refused insert leaves the clock where it was; the insert that is written is stamped after the delete and wins")
    func refusedReinsertLeavesTheClock() async throws {
        let dir = StoreDirectory()
        let clock = ManualClock()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        let remote = ReplicaID.random()
        let reused = ObjectID()
        let future = HLC(milliseconds: Self.now + 30 * 86_400_000, counter: 0)  // 30 days ahead
        try await store.applyRemote([TransactionRecord(replica: remote, events: [
            Event(id: EventID(replica: remote, sequence: 1), hlc: HLC(milliseconds: Self.now, counter: 0),
                  change: .insert(entity: "Folder", object: reused, fields: ["name": "remote"])),
            Event(id: EventID(replica: remote, sequence: 2), hlc: future, change: .delete(entity: "Folder", object: reused)),
        ])])
        #expect(store.object(reused) == nil)
        // Refused (a required value is null): nothing is written, and the clock stays near now.
        await #expect(throws: StoreError.self) {
            try await store.transaction { tx in _ = try tx.insert("Folder", id: reused, ["name": .null]) }
        }
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "unrelated"]) }
        let unrelated = try #require(try store.transactions().last?.transaction.events.last?.hlc)
        #expect(unrelated < future && unrelated.milliseconds <= Self.now + StoreOptions.defaultMaxClockLead + 1,
                "a refused insert moved the clock to the delete it would have superseded")
        // Written: stamped after the delete, so the object is back.
        try await store.transaction { tx in _ = try tx.insert("Folder", id: reused, ["name": "local"]) }
        let reinsert = try #require(try store.transactions().last?.transaction.events.last?.hlc)
        #expect(reinsert > future)
        #expect(store.object(reused)?["name"] == "local")
        try await store.close()
    }

    @Test("A replica whose own events reached the clock's end refuses commits with clockOverflow and writes nothing")
    func commitAtOverflow() async throws {
        let dir = StoreDirectory()
        var options = storeOptions(clock: ManualClock())
        let own = ReplicaID.random()
        options.newReplicaID = own
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        // Its own event at the largest stamp (as a copy of it with a broken clock would author).
        let event = Event(id: EventID(replica: own, sequence: 50), hlc: HLC(rawValue: .max),
                          change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": "end of time"]))
        try await store.applyRemote([TransactionRecord(replica: own, events: [event])])
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        let before = try reopened.transactions().count
        do {
            try await reopened.transaction { tx in _ = try tx.insert("Folder", ["name": "too late"]) }
            Issue.record("a commit past the clock's end succeeded")
        } catch let error as StoreError {
            #expect(error.code == .clockOverflow)
        }
        #expect(try reopened.transactions().count == before, "nothing was written")
        #expect(reopened.fetch("Folder", where: { $0["name"] == "too late" }).isEmpty)
        try await reopened.close()
    }
    @Test("A device whose wall clock is behind (two hours, twenty years, before 1970) edits a field after taking in another device's edit of it: its edit is stamped after the one it replaces and wins on both devices, across a reopen", arguments: [
        UInt64(2 * 3_600_000), UInt64(20 * 365 * 86_400_000), ClockBoundsTests.now,
    ])
    func editAfterObservedEventWithClockBehind(behind: UInt64) async throws {
        let (dirA, dirB) = (StoreDirectory(), StoreDirectory())
        let a = try await Store.open(at: dirA.path, schema: notesSchema, options: storeOptions(clock: ManualClock()))
        let lagging = ManualClock()
        lagging.milliseconds.store(Self.now - behind, ordering: .relaxed)
        var b = try await Store.open(at: dirB.path, schema: notesSchema, options: storeOptions(clock: lagging))

        let note = try await a.transaction { tx in try tx.insert("Note", ["title": "from A"]) }
        try await a.transaction { tx in try tx.update(note, ["title": "from A, edited"]) }
        try await b.applyRemote(try a.transactions().map(\.transaction))
        #expect(b.object(note)?["title"] == "from A, edited")
        // The lagging device reopens (its clock is rebuilt from the log) before it edits.
        try await b.close()
        b = try await Store.open(at: dirB.path, schema: notesSchema, options: storeOptions(clock: lagging))
        try await b.transaction { tx in try tx.update(note, ["title": "from B"]) }
        #expect(b.object(note)?["title"] == "from B", "behind by \(behind) ms: the device's own edit lost on the device")

        let own = try b.transactions().map(\.transaction).filter { $0.replica == b.replicaID }
        try await a.applyRemote(own)
        #expect(a.object(note)?["title"] == "from B", "behind by \(behind) ms: the edit lost on the other device")
        #expect(a.digest() == b.digest())
        // The clock stays past what the edit superseded: the replica's later edits never go back.
        try await b.transaction { tx in _ = try tx.insert("Note", ["title": "unrelated"]) }
        let unrelated = try b.transactions().last?.transaction.events.last?.hlc
        #expect(unrelated.map { $0 > (try? a.transactions().last?.transaction.events.last?.hlc) ?? HLC(rawValue: 0) } == true,
                "the replica's clock never goes back")
        try await a.close()
        try await b.close()
    }
}
