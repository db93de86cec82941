import Foundation
import Logging
import Synchronization
import Testing
@testable import Strata
@testable import StrataCore

@Suite("Authors: which user pushed each replica")
struct AuthorsTests {
    let alice = ReplicaID(rawValue: 0xA11CE)
    let bob = ReplicaID(rawValue: 0xB0B)
    let carol = ReplicaID(rawValue: 0xCA201)

    func file(_ dir: StoreDirectory) -> String { dir.path + "/authors.json" }

    @Test("Recorded authors read back, from the store and from its files")
    func roundTrip() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(store.authors().isEmpty)
        #expect(try Store.authors(ofStoreAt: dir.path).isEmpty)
        try store.recordAuthors([alice: "alice", bob: "bob"])
        #expect(store.authors() == [alice: "alice", bob: "bob"])
        #expect(try Store.authors(ofStoreAt: dir.path) == [alice: "alice", bob: "bob"])
        let text = try String(contentsOfFile: file(dir), encoding: .utf8)
        #expect(text.contains("\"format\" : 1") && text.contains("\"checksum\""))
        try await store.close()
    }

    @Test("New replicas merge with the known ones; nothing new, nothing written")
    func merge() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try store.recordAuthors([alice: "alice"])
        try store.recordAuthors([bob: "bob", carol: ""])
        #expect(store.authors() == [alice: "alice", bob: "bob"])
        // The same report again (as after every pull) leaves the file as it was, not rewritten.
        let before = try FileManager.default.attributesOfItem(atPath: file(dir))[.modificationDate] as? Date
        let inode = try FileManager.default.attributesOfItem(atPath: file(dir))[.systemFileNumber] as? Int
        try store.recordAuthors([alice: "alice", bob: "bob"])
        try store.recordAuthors([:])
        #expect(try FileManager.default.attributesOfItem(atPath: file(dir))[.systemFileNumber] as? Int == inode)
        #expect(try FileManager.default.attributesOfItem(atPath: file(dir))[.modificationDate] as? Date == before)
        try await store.close()
    }

    @Test("A known replica's user never changes; the attempt is logged")
    func neverChanges() async throws {
        let dir = StoreDirectory()
        let warnings = CapturedWarnings()
        var options = storeOptions()
        options.logger = Logger(label: "authors-test") { _ in warnings }
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        try store.recordAuthors([alice: "alice"])
        try store.recordAuthors([alice: "mallory", bob: "bob"])
        #expect(store.authors() == [alice: "alice", bob: "bob"])
        #expect(warnings.messages.contains { $0.contains("never changes") && $0.contains("mallory") })
        try await store.close()
    }

    @Test("A damaged file: tools are told, the store reads nothing from it, and the next report rewrites it")
    func damaged() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try store.recordAuthors([alice: "alice", bob: "bob"])
        // A hand edit that keeps the JSON valid: only the checksum tells.
        let text = try String(contentsOfFile: file(dir), encoding: .utf8)
        try text.replacingOccurrences(of: "\"bob\"", with: "\"eve\"").write(toFile: file(dir), atomically: true, encoding: .utf8)
        #expect(throws: StoreError.self) { try Store.authors(ofStoreAt: dir.path) }
        do {
            _ = try Store.authors(ofStoreAt: dir.path)
        } catch let error as StoreError {
            #expect(error.code == .damagedAuthors && error.message.contains("checksum"))
        }
        #expect(store.authors().isEmpty)
        // Nothing new reported: the damaged file stays as it is.
        try store.recordAuthors([:])
        #expect(throws: StoreError.self) { try Store.authors(ofStoreAt: dir.path) }
        // The server's report is what is trusted: the damaged entries are not carried over.
        try store.recordAuthors([alice: "alice"])
        #expect(try Store.authors(ofStoreAt: dir.path) == [alice: "alice"])
        #expect(FileManager.default.fileExists(atPath: file(dir) + ".damaged"))
        // Truncated, and not JSON at all.
        for bytes in [Array("{\"format\": 1, \"auth".utf8), [0xFF, 0x00, 0x13]] {
            try Data(bytes).write(to: URL(fileURLWithPath: file(dir)))
            #expect(throws: StoreError.self) { try Store.authors(ofStoreAt: dir.path) }
            try store.recordAuthors([bob: "bob"])
            #expect(try Store.authors(ofStoreAt: dir.path) == [bob: "bob"])
            try Data(bytes).write(to: URL(fileURLWithPath: file(dir)))
        }
        try await store.close()
    }

    @Test("A file of a newer format is reported, and never overwritten")
    func newerFormat() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let newer = Data("{\"format\": 2, \"users\": {}}".utf8)
        try newer.write(to: URL(fileURLWithPath: file(dir)))
        #expect(throws: StoreError.self) { try Store.authors(ofStoreAt: dir.path) }
        #expect(throws: StoreError.self) { try store.recordAuthors([alice: "alice"]) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file(dir))) == newer)
        try await store.close()
    }

    @Test("Authors survive closing and reopening the store")
    func survivesReopen() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try store.recordAuthors([alice: "alice", store.replicaID: "me"])
        let own = store.replicaID
        try await store.close()
        #expect(throws: StoreError.self) { try store.recordAuthors([bob: "bob"]) }
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        #expect(reopened.authors() == [alice: "alice", own: "me"])
        try reopened.recordAuthors([bob: "bob"])
        #expect(reopened.authors().count == 3)
        try await reopened.close()
    }
}

/// Warnings a store logged, for the tests that check one was.
final class CapturedWarnings: LogHandler, @unchecked Sendable {
    private let lock = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var messages: [String] { lock.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        let text = "\(message) \((metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))"
        lock.withLock { $0.append(text) }
    }
}
