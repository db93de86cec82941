import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore
import StrataTestSupport

@Suite("Read-only readers beside the writer (StoreReader)")
struct StoreReaderTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, optional: false), Attribute("index", .integer)])
    }

    @Test("a second process reads the store while this one holds it for writing, follows every commit across segment rollovers and a compaction, and ends with the writer's digest")
    func secondProcessFollowsTheWriter() async throws {
        let dir = StoreDirectory()
        var options = StoreOptions(durability: .groupCommit)
        options.segmentSize = 4096  // many rollovers, so the reader moves from segment to segment
        options.autoCompaction = .disabled
        let store = try await Store.open(at: dir.path, schema: Self.schema, options: options)
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "first", "index": 0]) }
        let total = 120

        let child = SpawnedProcess()
        child.executableURL = try ChildProcess.executable("store-reader-child")
        child.arguments = [dir.path, String(total)]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        for i in 1..<total {
            try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("note \(i) " + String(repeating: "x", count: 100)), "index": .integer(Int64(i))]) }
            // Halfway, the writer compacts: the segments the reader may not have read yet retire.
            if i == total / 2 { _ = try await store.compact() }
            if i % 10 == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        let finished = await Task.detached { child.waitUntilExit(); return child.terminationStatus }.value
        let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(finished == 0, "the reader: \(lines.suffix(3))")
        let counts = lines.compactMap { $0.hasPrefix("count ") ? Int($0.dropFirst(6)) : nil }
        #expect(counts.last == total)
        #expect(counts.count >= 2, "the reader saw the store grow while it was written: \(counts)")
        #expect(lines.last == "digest \(store.digest())"[...])
        try await store.close()
    }

    @Test("in one process: a reader sees nothing new until it refreshes, then exactly the new commits; a fork of the writer makes it load again; a record the writer has not finished is not read")
    func refreshAndFork() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: Self.schema, options: StoreOptions(durability: .groupCommit))
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "a"]) }
        let reader = try StoreReader.open(at: dir.path)
        #expect(reader.fetch("Note").map { $0["title"] } == ["a"])
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "b"]) }
        #expect(reader.fetch("Note").count == 1, "a reader changes only when refreshed")
        #expect(try reader.refresh() == 1)
        #expect(Set(reader.fetch("Note").map { $0["title"] }) == ["a", "b"])
        #expect(reader.digest() == store.digest())

        // Bytes past the last whole record (a record being written): not read, and not an error.
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: Store.logDirectory(ofStoreAt: dir.path)).filter { $0.hasSuffix(".seg") }.max())
        let handle = try #require(FileHandle(forWritingAtPath: Store.logDirectory(ofStoreAt: dir.path) + "/" + segment))
        handle.seekToEndOfFile()
        handle.write(Data([0x53, 0x54, 0x52, 0x41, 0x00, 0x01]))
        try handle.close()
        #expect(try reader.refresh() == 0)
        #expect(reader.digest() == store.digest())
        try await store.close()

        // The writer forks (a restored copy): the reader loads again under the new lineage.
        let reopened = try await Store.open(at: dir.path, schema: Self.schema, options: StoreOptions(durability: .groupCommit))
        _ = try await reopened.fork(keepingThrough: 1)
        try await reopened.transaction { tx in _ = try tx.insert("Note", ["title": "c"]) }
        try reader.refresh()
        #expect(reader.digest() == reopened.digest())
        try await reopened.close()
    }
}
