import Foundation
@_spi(StrataInternals) import Strata
import StrataTestSupport
import Testing
import StrataCore

@Suite("Merging an uploaded state")
struct MergeWithholdingTests {
    @Test("a merge withholding one replica's events past a sequence leaves out exactly their effects, without empty records for objects only they named, and believes applied claims only as far as told")
    func withholding() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.sub("device"), schema: notesSchema, options: storeOptions())
        var folders: [ObjectID] = []
        for i in 0..<4 {
            folders.append(try await store.transaction { tx in try tx.insert("Folder", ["name": .string("f\(i)")]) })
        }
        let state = try ProjectionBuilder(snapshot: try store.statePayload())
        let replica = store.replicaID
        let highest = try #require(state.appliedSequences().first { $0.replica == replica }).highest

        let nothing = ProjectionBuilder()
        try nothing.merge(state, believingApplied: [:], withholding: (replica, 0))
        #expect(nothing.knownObjectIDs().isEmpty)
        #expect(nothing.appliedSequences().isEmpty)

        // The schema transaction and the first two inserts are kept; the last two are withheld.
        let cut = highest - 2
        let part = ProjectionBuilder()
        try part.merge(state, believingApplied: [replica: cut], withholding: (replica, cut))
        #expect(part.knownObjectIDs() == folders.prefix(2).sorted())
        #expect(part.appliedSequences().first { $0.replica == replica }?.contiguous == cut)

        let all = ProjectionBuilder()
        try all.merge(state, believingApplied: nil)
        #expect(all.knownObjectIDs() == folders.sorted())
        #expect(all.digest() == store.digest())
        try await store.close()
    }
}
