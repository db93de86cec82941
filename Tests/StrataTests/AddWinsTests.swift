import Foundation
@_spi(StrataInternals) @testable import Strata
import Testing
import StrataCore

/// To-many relationships are add-wins sets; these tests hold the caller's side of that promise.
@Suite("Add-wins from the caller's side")
struct AddWinsTests {
    @Test("adding a member that is already present writes an add, so it survives a concurrent remove")
    func reAddSurvivesConcurrentRemove() async throws {
        let dirA = StoreDirectory(), dirB = StoreDirectory()
        let a = try await Store.open(at: dirA.path, schema: notesSchema, options: storeOptions())
        let b = try await Store.open(at: dirB.path, schema: notesSchema, options: storeOptions())
        let (note, tag) = try await a.transaction { tx in
            let note = try tx.insert("Note", ["title": "n"])
            let tag = try tx.insert("Tag", ["label": "t"])
            try tx.add(note, "tags", tag)
            return (note, tag)
        }
        try await b.applyRemote(try a.transactions().map(\.transaction))
        #expect(b.related(note, "tags").map(\.id) == [tag])

        // B removes the member; A, not having seen that, adds it again.
        let end = a.segmentLog.endPosition
        try await b.transaction { tx in try tx.remove(note, "tags", tag) }
        try await a.transaction { tx in try tx.add(note, "tags", tag) }
        #expect(a.segmentLog.endPosition == end + 1, "the re-add wrote nothing")

        try await a.applyRemote(try b.transactions().map(\.transaction))
        try await b.applyRemote(try a.transactions().map(\.transaction))
        #expect(a.related(note, "tags").map(\.id) == [tag])
        #expect(b.related(note, "tags").map(\.id) == [tag])
        #expect(a.digest() == b.digest())
        try await a.close()
        try await b.close()
    }
}
