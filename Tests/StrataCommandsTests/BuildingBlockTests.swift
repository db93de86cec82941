import Foundation
import Strata
import StrataLog
@testable import StrataCommands
import StrataTestSupport
import Testing
import StrataCore

/// The pieces the commands are made of.
@Suite("CLI building blocks")
struct BuildingBlockTests {
    @Test("SequenceRanges.subtracting agrees with sets on random inputs")
    func rangesSubtract() {
        let runs = Int(ProcessInfo.processInfo.environment["STRATA_PROPERTY_RUNS"] ?? "") ?? 200
        let base = UInt64(ProcessInfo.processInfo.environment["STRATA_PROPERTY_SEED"] ?? "") ?? 0xD1FF
        for run in 0..<runs {
            let seed = base &+ UInt64(run)
            var g = SeededGenerator(seed: seed)
            func random() -> (AppliedSequences, Set<UInt64>) {
                let contiguous = UInt64.random(in: 0...20, using: &g)
                let above = Set((0..<Int.random(in: 0...8, using: &g)).map { _ in UInt64.random(in: (contiguous + 2)...40, using: &g) })
                return (AppliedSequences(replica: ReplicaID(rawValue: 1), contiguous: contiguous, above: above.sorted()),
                        Set(1...max(1, contiguous)).filter { $0 <= contiguous }.union(above))
            }
            let (a, setA) = random()
            let (b, setB) = random()
            let difference = SequenceRanges(a).subtracting(SequenceRanges(b))
            let expected = setA.subtracting(setB)
            let got = Set(difference.ranges.flatMap { Array($0) })
            #expect(got == expected, "seed \(seed): \(a) − \(b)")
            #expect(difference.count == UInt64(expected.count), "seed \(seed)")
            // Disjoint, sorted, not adjacent.
            for (x, y) in zip(difference.ranges, difference.ranges.dropFirst()) {
                #expect(x.upperBound + 1 < y.lowerBound, "seed \(seed)")
            }
        }
    }

    @Test("Ranges print compactly")
    func rangesText() {
        #expect(SequenceRanges(AppliedSequences(replica: ReplicaID(rawValue: 1), contiguous: 5, above: [7, 8, 9, 12])).description == "1…5, 7…9, 12")
        #expect(SequenceRanges(nil).description == "none")
    }

    @Test("Dates keep their microseconds; times parse as ISO 8601 or @microseconds")
    func times() {
        #expect(DateText.microseconds("2026-03-01T09:30:00.123456Z") == 1_772_357_400_123_456)
        #expect(DateText.microseconds("2026-03-01T09:30:00Z") == 1_772_357_400_000_000)
        #expect(DateText.microseconds("2026-03-01T10:30:00.5+01:00") == 1_772_357_400_500_000)
        #expect(DateText.microseconds("tomorrow") == nil)
        #expect(TimeArgument.microseconds("@42") == 42)
        #expect(JSONValue.isoMicroseconds(1_772_357_400_123_456) == "2026-03-01T09:30:00.123456Z")
        #expect(JSONValue.isoMicroseconds(1_772_357_400_123_000) == "2026-03-01T09:30:00.123Z")
        #expect(Format.time(microseconds: -1) == "1969-12-31T23:59:59.999Z")
    }

    @Test("The entry index finds the transaction holding an event")
    func entryIndex() throws {
        var index = EntryIndex()
        let r1 = ReplicaID(rawValue: 1)
        let r2 = ReplicaID(rawValue: 2)
        func header(_ replica: ReplicaID, _ first: UInt64, _ count: UInt64) throws -> TransactionHeader {
            let events = (0..<count).map { Event(id: EventID(replica: replica, sequence: first + $0), hlc: HLC(rawValue: 1), change: .delete(entity: "E", object: ObjectID(rawValue: 1))) }
            return try TransactionHeader(decoding: TransactionRecord(replica: replica, events: events).encoded())
        }
        index.add(position: 0, timestamp: 0, header: try header(r1, 1, 3))
        index.add(position: 1, timestamp: 0, header: try header(r2, 5, 2))
        index.add(position: 2, timestamp: 0, header: try header(r1, 4, 1))
        index.add(position: 3, timestamp: 0, header: try header(r2, 1, 2))
        #expect(index.entry(holding: EventID(replica: r1, sequence: 2))?.position == 0)
        #expect(index.entry(holding: EventID(replica: r1, sequence: 4))?.position == 2)
        #expect(index.entry(holding: EventID(replica: r2, sequence: 6))?.position == 1)
        #expect(index.entry(holding: EventID(replica: r2, sequence: 2))?.position == 3)
        #expect(index.entry(holding: EventID(replica: r2, sequence: 3)) == nil)
        #expect(index.entry(holding: EventID(replica: r1, sequence: 9)) == nil)
        #expect(index.entry(holding: EventID(replica: ReplicaID(rawValue: 3), sequence: 1)) == nil)
    }

    @Test("A snapshot that disagrees with the log is found by verify and set aside by repair")
    func wrongSnapshot() async throws {
        let dir = TemporaryDirectory()
        let store = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        // A well-formed snapshot (checksums fine) of the wrong state: an empty projection.
        let log = try SegmentLog.open(at: Store.logDirectory(ofStoreAt: store))
        _ = try log.writeSnapshot(ProjectionBuilder().snapshotPayload(), position: 10)
        try await log.close()
        let found = try Verification.run(try StoreFiles(store), progress: nil)
        #expect(!found.healthy)
        #expect(found.findings.first?.message.contains("does not match a replay of the log up to position 10") == true)
        #expect(found.findings.first?.position == 10)
        #expect(found.wrongSnapshots.count == 1)
        // The log holds everything the (empty) snapshot holds: it is set aside, into the quarantine.
        #expect(found.snapshots.first { $0.position == 10 }?.heldByLog == true)
        let quarantine = try Quarantine(store: store)
        let (moved, refused) = try RepairText.setAsideSnapshots(found, in: Store.logDirectory(ofStoreAt: store), quarantine: quarantine)
        #expect(moved == ["snapshot-00000000000000000010.snap"])
        #expect(refused.isEmpty)
        #expect(FileManager.default.fileExists(atPath: quarantine.folder + "/snapshots/snapshot-00000000000000000010.snap"))
        #expect(try Verification.run(try StoreFiles(store), progress: nil).healthy)
        // A right snapshot is confirmed.
        let opened = try Store.open(at: store)
        _ = try await opened.compact()
        try await opened.close()
        let again = try Verification.run(try StoreFiles(store), progress: nil)
        #expect(again.healthy)
        #expect(again.snapshots.contains { $0.status == "ok (digest matches a replay)" })
    }

    @Test("A torn tail (an interrupted append) is a note, not a finding; the reading commands stop before it")
    func tornTail() throws {
        let dir = TemporaryDirectory()
        let store = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        let segment = Store.logDirectory(ofStoreAt: store) + "/00000000000000000000.seg"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: segment))
        try handle.truncate(atOffset: UInt64(size - 10))
        try handle.close()
        let verification = try Verification.run(try StoreFiles(store), progress: nil)
        #expect(verification.healthy)
        #expect(verification.notes.contains { $0.hasPrefix("torn tail in 00000000000000000000.seg") })
        #expect(verification.endPosition == 47, "the last record (position 47, B's delete) is the torn one")
        let state = try ReplayState.run(try StoreFiles(store), until: .position(.max), entity: nil, progress: nil)
        #expect(state.lastPosition == 46)
    }

    @Test("Inspection counts events by kind and entity and lists replicas, snapshots and segments")
    func inspection() throws {
        let inspection = try Inspection.run(try StoreFiles(FixturePaths.deviceB), objects: true, progress: nil)
        #expect(inspection.startPosition == 43 && inspection.endPosition == 48)
        #expect(inspection.transactions == 5)
        // A's last tag (#43), C's schema (#44), B's rename and delete, C's note.
        #expect(inspection.eventsByKind == ["schema": 1, "update": 1, "delete": 1, "insert": 2])
        #expect(inspection.snapshots.map(\.position) == [45])
        #expect(inspection.replicas.count == 3)
        // B's own events: 1 (schema) and 2…3 in the log after the snapshot; C's: 1 in the snapshot, 2 in the log.
        #expect(inspection.replicas.first { $0.isThisStore }?.sequences == "1…3")
        #expect(inspection.replicas.first { $0.replica.hasPrefix("c3c3") }?.sequences == "1…2")
        #expect(inspection.replicas.first { $0.replica.hasPrefix("a1a1") }?.count == 48)
        #expect(inspection.objectsByEntity?["Note"] == 3)
        #expect(inspection.digest?.count == 64)
        let quick = try Inspection.run(try StoreFiles(FixturePaths.deviceB), progress: nil)
        #expect(quick.objects == nil && quick.digest == nil)
        #expect(quick.schema.map(\.name) == ["Folder", "Note", "Tag"])
        #expect(inspection.segments.map(\.name) == ["00000000000000000043.seg"])
    }
}
