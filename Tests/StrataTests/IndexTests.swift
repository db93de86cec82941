import Foundation
import Synchronization
import Testing
@testable import Strata
@testable import StrataCore

@Suite("Filters and indexes")
struct IndexTests {
    private func snapshot(_ values: [String: Value]) -> ObjectSnapshot {
        ObjectSnapshot(id: ObjectID(), entity: "Note", values: values, toMany: [:])
    }

    @Test("comparisons match values of the bound's kind only; numbers compare across integer and double; NaN and null match no comparison")
    func filterSemantics() {
        let three = snapshot(["rank": .integer(3)])
        let nan = snapshot(["rank": .double(.nan)])
        let none = snapshot([:])
        let word = snapshot(["rank": .string("3")])
        #expect(Filter.less("rank", .double(3.5)).matches(three))
        #expect(Filter.greaterOrEqual("rank", .integer(3)).matches(three))
        #expect(!Filter.greater("rank", .integer(3)).matches(three))
        #expect(Filter.between("rank", .integer(1), .double(3)).matches(three))
        #expect(!Filter.less("rank", .integer(10)).matches(none), "null is below no number")
        #expect(!Filter.less("rank", .integer(10)).matches(word), "a string is not compared with a number")
        #expect(!Filter.less("rank", .integer(10)).matches(nan) && !Filter.greater("rank", .integer(10)).matches(nan))
        #expect(!Filter.equal("rank", .double(.nan)).matches(nan), "NaN equals nothing")
        #expect(Filter.equal("rank", .null).matches(none), "an absent value equals null")
        #expect(Filter.equal("rank", .double(3)).matches(three), "3 equals 3.0: equal numbers")
        #expect(!Filter.equal("rank", .double(3.000001)).matches(three))
        #expect(Filter.equal("rank", 3).matches(three) && Filter.oneOf("rank", [1, 3]).matches(three), "literals")
        #expect(!Filter.equal("rank", .integer(9_007_199_254_740_993)).matches(snapshot(["rank": .double(9_007_199_254_740_992)])),
                "exact above 2^53: no rounding")
        #expect(Filter.oneOf("rank", [.integer(1), .integer(3)]).matches(three))
        #expect(!Filter.oneOf("rank", []).matches(three))
        #expect((Filter.less("rank", .integer(5)) && !Filter.equal("rank", .integer(3))).matches(three) == false)
        #expect((Filter.equal("rank", .integer(9)) || Filter.equal("rank", .integer(3))).matches(three))
        #expect(Filter.all([]).matches(three) && !Filter.any([]).matches(three))
    }

    @Test("an index naming an unknown entity, a relationship or no attribute is refused when the store opens")
    func invalidDeclarations() async throws {
        for (index, expected) in [(AttributeIndex("Nope", on: "title"), "entity Nope"),
                                  (AttributeIndex("Note", on: "folder"), "folder, which is a relationship"),
                                  (AttributeIndex("Note", on: "nope"), "nope, which is not an attribute"),
                                  (AttributeIndex("Note", on: []), "names no attribute")] {
            let dir = StoreDirectory()
            var options = storeOptions()
            options.indexes = [index]
            do {
                _ = try await Store.open(at: dir.path, schema: notesSchema, options: options)
                Issue.record("\(index) was accepted")
            } catch let error as StoreError {
                #expect(error.code == .invalidArgument)
                #expect(error.message.contains(expected), "\(error.message)")
            }
        }
    }

    @Test("a filter on an indexed attribute is answered from the index; a sort by it with a limit walks it; other filters scan")
    func plansUseTheIndex() async throws {
        let dir = StoreDirectory()
        var options = storeOptions()
        options.indexes = [AttributeIndex("Note", on: "rank"), AttributeIndex("Note", on: "title", "score")]
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        try await store.transaction { tx in
            for i in 0..<200 { _ = try tx.insert("Note", ["title": .string("t\(i % 10)"), "rank": .integer(Int64(i)), "score": .double(Double(i % 7))]) }
        }
        store.core.withLock { core in
            let projection = core.projection
            #expect(projection.indexCandidates(entity: "Note", filter: .equal("rank", .integer(5)))?.count == 1)
            #expect(projection.indexCandidates(entity: "Note", filter: .between("rank", .integer(10), .integer(19)))?.count == 10)
            // Ranges are walked with their ends included (the filter then drops score 4): 9 of
            // the 20 notes titled t3 are read, 6 match.
            #expect(projection.indexCandidates(entity: "Note", filter: .equal("title", "t3") && .greater("score", .double(4)))?.count == 9)
            #expect(projection.indexCandidates(entity: "Note", filter: .equal("score", .double(1))) == nil, "score alone leads no index")
            #expect(projection.indexCandidates(entity: "Note", filter: .not(.equal("rank", .integer(5)))) == nil)
            #expect(projection.indexCandidates(entity: "Note", filter: .less("rank", .null))?.isEmpty == true, "a comparison with null matches nothing")
            #expect(projection.indexSizes == [200, 200])
        }
        #expect(store.fetch("Note", matching: .equal("title", "t3") && .greater("score", .double(4))).count == 6)
        let top = store.fetch("Note", matching: .greaterOrEqual("rank", .integer(0)), sortedBy: [SortKey("rank", ascending: false)], limit: 3)
        #expect(top.map { $0["rank"] } == [.integer(199), .integer(198), .integer(197)])
        let typed = store.fetch("Note", matching: .oneOf("rank", [.integer(7), .integer(8), .integer(1_000)]))
        #expect(Set(typed.map { $0["rank"] }) == [.integer(7), .integer(8)])
        try await store.close()
    }

    @Test("an observed query with a filter follows commits through the index")
    func observedFilter() async throws {
        let dir = StoreDirectory()
        var options = storeOptions()
        options.indexes = [AttributeIndex("Note", on: "rank")]
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: options)
        let first = try await store.transaction { tx in try tx.insert("Note", ["rank": .integer(1)]) }
        var results = store.observe("Note", matching: .greater("rank", .integer(5)), sortedBy: [SortKey("rank")]).makeAsyncIterator()
        #expect(await results.next()?.count == 0)
        try await store.transaction { tx in try tx.update(first, ["rank": .integer(9)]) }
        #expect(await results.next()?.map(\.id) == [first])
        try await store.transaction { tx in try tx.delete(first) }
        #expect(await results.next()?.isEmpty == true)
        #expect(store.count("Note", matching: .greater("rank", 0)) == 0)
        try await store.close()
    }

    @Test("a database fetches with a filter in every zone, each through its own indexes")
    func databaseFilter() async throws {
        let dir = StoreDirectory()
        var options = storeOptions()
        options.indexes = [AttributeIndex("Note", on: "rank")]
        let database = try await Database.open(at: dir.path, schema: notesSchema, options: options)
        let other = ZoneReference("other")
        _ = try await database.addZone(other)
        try await database.transaction { tx in
            _ = try tx.insert("Note", ["rank": .integer(1)])
            _ = try tx.insert("Note", ["rank": .integer(2)], in: other)
            _ = try tx.insert("Note", ["rank": .integer(3)], in: other)
        }
        let found = try database.fetch("Note", matching: .greaterOrEqual("rank", .integer(1)), sortedBy: [SortKey("rank")])
        #expect(found.map { $0["rank"] } == [.integer(1), .integer(2), .integer(3)])
        #expect(try database.fetch("Note", matching: .equal("rank", .integer(2)), in: [other]).count == 1)
        try await database.close()
    }
}
