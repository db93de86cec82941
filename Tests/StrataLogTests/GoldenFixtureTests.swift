import FixtureGenerator
import Foundation
import Testing
@testable import StrataLog

/// The committed fixtures pin format version 1: the reader must keep reading them, and the writer
/// must keep producing exactly their bytes. Regenerating them is only right with a new format
/// version (and a reader kept for this one).
@Suite("Golden fixtures (format version 1)")
struct GoldenFixtureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/log-v1").path

    /// A writable copy, since opening may truncate a torn tail or rebuild an index.
    func copy(_ name: String, _ dir: TemporaryDirectory) throws -> String {
        try copyDirectory(Self.root + "/" + name, to: dir.sub(name))
        return dir.sub(name)
    }

    func expected(_ records: [[LogEntry]], from start: LogPosition = 0) -> [StoredEntry] {
        var position: LogPosition = 0
        var result: [StoredEntry] = []
        for record in records {
            for entry in record {
                if position >= start { result.append(StoredEntry(position: position, timestamp: entry.timestamp, payload: entry.payload)) }
                position += 1
            }
        }
        return result
    }

    @Test("The basic log reads back every entry")
    func basic() throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: try copy("basic", dir), options: bufferedOptions())
        #expect(log.logID == FixtureRecipe.logID)
        #expect(try allEntries(log) == expected(FixtureRecipe.basicRecords()))
        #expect(log.recovery.tornTail == nil)
        var cursor = try log.records(from: 0)
        var codecs: [RecordCodec] = []
        while let record = try cursor.next() { codecs.append(record.codec) }
        #expect(codecs == [.raw, .raw, .lz4, .raw, .lz4, .raw])
    }

    @Test("The multi-segment log reads back from its retained start, with its snapshot")
    func multiSegment() throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: try copy("multi-segment", dir), options: bufferedOptions())
        #expect(log.segments().count == 3)
        #expect(log.recovery.rebuiltIndexes.isEmpty)
        let start = log.startPosition
        #expect(start > 0)
        #expect(try allEntries(log) == expected(FixtureRecipe.multiSegmentRecords(), from: start))
        let snapshot = try #require(try log.latestValidSnapshot().snapshot)
        #expect(snapshot.info.position == FixtureWriter.multiSegmentSnapshotPosition)
        #expect(snapshot.payload == FixtureRecipe.snapshotPayload(position: FixtureWriter.multiSegmentSnapshotPosition))
        #expect(snapshot.created == FixtureRecipe.baseTime)
    }

    @Test("The torn-tail log opens with its complete records")
    func tornTail() throws {
        let dir = TemporaryDirectory()
        let log = try SegmentLog.open(at: try copy("torn-tail", dir), options: bufferedOptions())
        #expect(try allEntries(log) == expected(Array(FixtureRecipe.basicRecords().dropLast())))
        #expect(log.recovery.tornTail != nil)
    }

    @Test("The mid-log-corruption log fails with the file and offset, and salvages to its first records")
    func midLogCorruption() throws {
        let dir = TemporaryDirectory()
        let path = try copy("mid-log-corruption", dir)
        let basic = try SegmentLog.open(at: try copy("basic", dir), options: bufferedOptions())
        let offsets = try FixtureWriter.recordOffsets(basic)
        expectOpenFails(path, bufferedOptions(), code: .corruptRecord, file: firstSegmentPath(path), offset: offsets[2])
        let salvage = try SegmentLog.salvage(at: path)
        #expect(salvage.truncatedAt == offsets[2])
        let log = try SegmentLog.open(at: path, options: bufferedOptions())
        #expect(try allEntries(log) == expected(Array(FixtureRecipe.basicRecords().prefix(2))))
    }

    @Test("The writer still produces the committed bytes exactly")
    func writerIsStable() async throws {
        let dir = TemporaryDirectory()
        try await FixtureWriter.writeAll(into: dir.path)
        for name in FixtureWriter.names {
            let committed = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/" + name).sorted()
            let written = try FileManager.default.contentsOfDirectory(atPath: dir.sub("log-v1/" + name)).sorted()
            #expect(written == committed, "\(name): files differ")
            for file in committed where written.contains(file) {
                let same = try readFile(Self.root + "/\(name)/\(file)") == readFile(dir.sub("log-v1/\(name)/\(file)"))
                #expect(same, "\(name)/\(file) changed: the format or the writer changed")
            }
        }
    }
}
