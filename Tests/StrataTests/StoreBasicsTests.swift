import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataLog
import StrataCore

@Suite("Store basics: transactions, reads, reopen")
struct StoreBasicsTests {
    @Test("Inserted objects read back with defaults, survive reopen, and relationships resolve both ways")
    func insertReadReopen() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(.groupCommit))
        let (folder, note, tag) = try await store.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "Inbox"])
            let note = try tx.insert("Note", ["title": "Groceries", "folder": .reference(folder), "rank": 3,
                                              "due": .date(1_767_225_600_123_456), "blob": .bytes(Data([1, 2, 3])),
                                              "ref": .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000042")!), "score": 2.5])
            let tag = try tx.insert("Tag", ["label": "home"])
            try tx.add(note, "tags", tag)
            // Reads inside the transaction see its own changes.
            #expect(tx.related(folder, "notes") == [note])
            return (folder, note, tag)
        }
        func check(_ store: Store) throws {
            let n = try #require(store.object(note))
            #expect(n.entity == "Note")
            #expect(n["title"] == "Groceries")
            #expect(n["pinned"] == false)          // default
            #expect(n["body"] == .null)            // optional, no default
            #expect(n["rank"] == 3)
            #expect(n["score"] == 2.5)
            #expect(n["due"] == .date(1_767_225_600_123_456))
            #expect(n["blob"] == .bytes(Data([1, 2, 3])))
            #expect(n["folder"] == .reference(folder))
            #expect(n.toMany["tags"] == [tag])
            #expect(store.related(folder, "notes").map(\.id) == [note])
            #expect(store.related(tag, "notes").map(\.id) == [note])
            #expect(store.fetch("Note").count == 1)
            #expect(store.count("Folder") == 1)
        }
        try check(store)
        let digest = store.digest()
        try await store.close()
        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions(.groupCommit))
        try check(reopened)
        #expect(reopened.digest() == digest)
        #expect(reopened.replicaID == store.replicaID)
        // The schema was recorded: a tool can open the store without the app's schema.
        try await reopened.close()
        let bare = try Store.open(at: dir.path)
        #expect(bare.schema.entity("Note")?.attribute("draft")?.isLocalOnly == true)
        #expect(bare.object(note)?["title"] == "Groceries")
    }

    @Test("Fetch filters, sorts (ties by ID) and limits")
    func fetchSortLimit() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try await store.transaction { tx in
            for i in 0..<20 { try tx.insert("Note", ["title": .string("n\(i % 5)"), "rank": .integer(Int64(i))]) }
        }
        let top = store.fetch("Note", where: { ($0["rank"].integerValue ?? 0) >= 10 }, sortedBy: [SortKey("title", ascending: false), SortKey("rank")], limit: 4)
        #expect(top.map { $0["rank"] } == [14, 19, 13, 18])
        #expect(store.fetch("Note", where: { $0["title"] == "n0" }).count == 4)
    }

    @Test("A thrown error rolls the transaction back and writes nothing")
    func rollback() async throws {
        struct Abort: Error {}
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let before = store.segmentLog.nextPosition
        let digest = store.digest()
        await #expect(throws: Abort.self) {
            try await store.transaction { tx in
                try tx.insert("Folder", ["name": "x"])
                throw Abort()
            }
        }
        #expect(store.segmentLog.nextPosition == before)
        #expect(store.digest() == digest)
        #expect(store.count("Folder") == 0)
    }
}
