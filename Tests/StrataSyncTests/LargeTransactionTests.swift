import Foundation
@_spi(StrataInternals) import Strata
import StrataProtocol
import StrataServer
import StrataSync
import StrataTestSupport
import Testing
import StrataCore

@Suite("Large transactions, end to end")
struct LargeTransactionTests {
    @Test("transactions of 100,000 inserts each sync: pushes are sized under the limit the server advertises, pull pages end early by bytes, and a second device converges")
    func hundredThousandInserts() async throws {
        let dir = TemporaryDirectory()
        var limits = ServerConfiguration.Limits()
        // Smaller than two such transactions together: each push must carry one.
        limits.maxBodyBytes = 8 << 20
        limits.maxPullBytes = 4 << 20
        try await withServer(dir.sub("server"), limits: limits) { url, _ in
            let writer = try await Store.open(at: dir.sub("writer"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            var sizes: [Int] = []
            for batch in 0..<3 {
                try await writer.transaction { tx in
                    for i in 0..<100_000 { _ = try tx.insert("Tag", ["label": .string("batch \(batch) tag \(i)")]) }
                }
            }
            for stored in try writer.transactions() where stored.transaction.events.count >= 100_000 {
                sizes.append(stored.transaction.encoded().count)
            }
            #expect(sizes.count == 3)
            #expect(sizes.allSatisfy { $0 > 2 << 20 && $0 < 8 << 20 }, "each transaction should be a few MiB: \(sizes)")
            #expect(sizes.reduce(0, +) > 8 << 20, "together they must exceed one push, or the test does not test")

            let pushed = try await SyncEngine(store: writer, server: url, zone: "big", credentials: "alice-secret").sync()
            #expect(pushed.pushedTransactions >= 3)
            let reader = try await Store.open(at: dir.sub("reader"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let pulled = try await SyncEngine(store: reader, server: url, zone: "big", credentials: "alice-secret").sync()
            #expect(pulled.pulledTransactions >= 3)
            #expect(reader.count("Tag") == 300_000)
            #expect(reader.digest() == writer.digest())
            try await reader.close()
            try await writer.close()
        }
    }

    @Test("a transaction larger than the server accepts is a typed error naming it and the limit; it is not sent, and nothing else is held back")
    func oversizedTransactionIsNamed() async throws {
        let dir = TemporaryDirectory()
        var limits = ServerConfiguration.Limits()
        limits.maxBodyBytes = 64 << 10
        try await withServer(dir.sub("server"), limits: limits) { url, storage in
            let store = try await Store.open(at: dir.sub("device"), schema: deviceSchema, options: StoreOptions(durability: .buffered))
            let engine = try SyncEngine(store: store, server: url, zone: "big", credentials: "alice-secret")
            try await store.transaction { tx in _ = try tx.insert("Tag", ["label": "small"]) }
            try await engine.sync()
            try await store.transaction { tx in
                for i in 0..<5_000 { _ = try tx.insert("Tag", ["label": .string("tag \(i)")]) }
            }
            await #expect {
                try await engine.sync()
            } throws: { error in
                guard let error = error as? SyncError, error.code == .tooLarge else { return false }
                return error.message.contains(store.replicaID.description) && error.message.contains("\(64 << 10)")
            }
            // What was pushed before stays; the server never saw the oversized transaction.
            #expect(try await storage.replicas(zone: ZoneID(owner: "alice", name: "big")).first?.acknowledged == 2)
            try await store.close()
        }
    }
}
