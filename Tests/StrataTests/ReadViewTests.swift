import Dispatch
import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

@Suite("Consistent reads (Store.read)")
struct ReadViewTests {
    @Test("every read inside one view sees the same state while local commits and remote applies land: notes and tags, always committed in pairs, always count the same")
    func consistentUnderConcurrentWrites() async throws {
        let p = try await Pair.make()
        let rounds = 60
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for i in 0..<rounds {
                    try await p.b.transaction { tx in
                        _ = try tx.insert("Note", ["title": .string("local \(i)")])
                        _ = try tx.insert("Tag", ["label": .string("local \(i)")])
                    }
                }
            }
            group.addTask {
                for i in 0..<rounds {
                    try await p.a.transaction { tx in
                        _ = try tx.insert("Note", ["title": .string("remote \(i)")])
                        _ = try tx.insert("Tag", ["label": .string("remote \(i)")])
                    }
                    // Remote applies land on b as whole transactions too.
                    let latest = try p.a.transactions(forSync: true).map(\.transaction).suffix(1)
                    try await p.b.applyRemote(Array(latest))
                }
            }
            group.addTask {
                var views = 0
                while views < 400 {
                    let (notes, tags, fetched, digestTwice) = p.b.read { view in
                        let notes = view.count("Note")
                        let fetched = view.fetch("Note", where: { _ in true }).count
                        let tags = view.count("Tag")
                        return (notes, tags, fetched, view.digest() == view.digest())
                    }
                    #expect(notes == tags && notes == fetched && digestTwice, "one view saw \(notes) notes, \(fetched) fetched, \(tags) tags")
                    views += 1
                    await Task.yield()
                }
            }
            try await group.waitForAll()
        }
        #expect(p.b.read { $0.count("Note") } == 2 * rounds)
        try await p.a.close()
        try await p.b.close()
    }

    @Test("a read's closure does not hold the store's lock: a commit completes while it runs, and the view keeps the state it was taken at")
    func readDoesNotBlockCommits() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": "before"]) }
        let committed = DispatchSemaphore(value: 0)
        // The read blocks its thread while it waits for the commit: a thread of its own, not one
        // of the cooperative pool's (two on this machine), which the commit's task needs.
        let (finished, seen) = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, [String]), Never>) in
            Thread.detachNewThread {
                continuation.resume(returning: store.read { view -> (Bool, [String]) in
                    Task.detached {
                        _ = try? await store.transaction { tx in try tx.insert("Note", ["title": "during"]) }
                        committed.signal()
                    }
                    // A liveness bound: with the lock held, the commit could never finish.
                    let finished = committed.wait(timeout: .now() + 120) == .success
                    return (finished, view.fetch("Note").compactMap { $0["title"].stringValue })
                })
            }
        }
        #expect(finished, "the commit did not complete while the read ran")
        #expect(seen == ["before"], "the view changed under the read: \(seen)")
        #expect(Set(store.fetch("Note").compactMap { $0["title"].stringValue }) == ["before", "during"])
        try await store.close()
    }
}
