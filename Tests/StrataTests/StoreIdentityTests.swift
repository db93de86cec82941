import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// `store.json`: format 2 with its checksum, format 1 still read, damage refused, and a store
/// whose log is gone never authoring again under its old replica ID.
@Suite("Store identity")
struct StoreIdentityTests {
    static let fixtureA = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/divergent/device-a").path

    func identityBytes(_ store: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: store + "/store.json")))
    }

    func write(_ bytes: [UInt8], to store: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: store + "/store.json"))
    }

    func expectCorrupt(_ body: () throws -> Void, _ comment: Comment) {
        do {
            try body()
            Issue.record(comment)
        } catch let error as StoreError {
            #expect(error.code == .corruptIdentity, comment)
            #expect(error.message.contains("store.json"), "the error names the file")
        } catch {
            Issue.record("\(comment): not a StoreError: \(error)")
        }
    }

    @Test("A new store writes format 2 with its log ID; it reads back equal, and a lineage round-trips")
    func roundTrip() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        let identity = store.identity
        #expect(identity.logID == store.segmentLog.logID.description)
        #expect(identity.lineage.isEmpty)
        try await store.close()
        let text = String(decoding: try identityBytes(dir.path), as: UTF8.self)
        #expect(text.hasPrefix(#"{"format":2,"#))
        #expect(text.contains(#","checksum":""#))
        #expect(try Store.identity(ofStoreAt: dir.path) == identity)
        #expect(try Store.replicaID(ofStoreAt: dir.path) == identity.replicaID)

        var forked = identity
        forked.lineage = [
            ReplicaFork(reason: .logLost, replica: .random(), keptThrough: 0, before: 0, successor: .random(), reauthored: 0, date: Store.forkDate()),
            ReplicaFork(reason: .forked, replica: .random(), keptThrough: 17, before: 40, successor: identity.replicaID, reauthored: 5,
                        date: Store.forkDate(), abandonedFrom: 22, restamped: true),
        ]
        let bytes = try StoreIdentityFile.encode(forked)
        #expect(try StoreIdentityFile.decode(bytes, path: "store.json").identity == forked)
        #expect(try StoreIdentityFile.encode(forked) == bytes, "the encoding is canonical")
    }

    @Test("Format 1 is read without being changed, and upgraded to format 2 when opened for writing")
    func formatOne() async throws {
        let fixture = try identityBytes(Self.fixtureA)
        let read = try Store.identity(ofStoreAt: Self.fixtureA)
        #expect(read.replicaID.description == "a1a10000-0000-0000-0000-000000000001")
        #expect(read.logID == nil && read.lineage.isEmpty)
        #expect(try identityBytes(Self.fixtureA) == fixture, "reading never writes")

        let dir = StoreDirectory()
        let copy = dir.sub("a")
        try FileManager.default.copyItem(atPath: Self.fixtureA, toPath: copy)
        let store = try Store.open(at: copy)
        #expect(store.replicaID == read.replicaID, "an upgrade keeps the replica ID")
        #expect(store.identity.logID == store.segmentLog.logID.description)
        try await store.close()
        #expect(String(decoding: try identityBytes(copy), as: UTF8.self).hasPrefix(#"{"format":2,"#))
        #expect(try Store.identity(ofStoreAt: copy) == store.identity)
    }

    @Test("Every single-bit flip of a format-2 store.json is refused with corruptIdentity")
    func bitFlips() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try await store.close()
        let original = try identityBytes(dir.path)
        var opened = 0
        for byte in original.indices {
            for bit in 0..<8 {
                var damaged = original
                damaged[byte] ^= 1 << bit
                try write(damaged, to: dir.path)
                expectCorrupt({ _ = try Store.identity(ofStoreAt: dir.path) }, "bit \(bit) of byte \(byte) was accepted")
                // Opening for writing refuses too (checked on a sample: an open is slower).
                if (byte * 8 + bit) % 41 == 0 {
                    opened += 1
                    do {
                        let reopened = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
                        Issue.record("bit \(bit) of byte \(byte): opened as replica \(reopened.replicaID)")
                        try await reopened.close()
                    } catch let error as StoreError {
                        #expect(error.code == .corruptIdentity, "bit \(bit) of byte \(byte): \(error)")
                    }
                }
            }
        }
        #expect(opened > 10)
        try write(original, to: dir.path)
        #expect(try Store.identity(ofStoreAt: dir.path).replicaID == store.identity.replicaID)
        // Truncated, empty and unknown formats as well.
        for damaged in [Array(original.dropLast(3)), [], Array(#"{"format":3,"replicaID":"a1a10000-0000-0000-0000-000000000001"}"#.utf8)] {
            try write(damaged, to: dir.path)
            expectCorrupt({ _ = try Store.identity(ofStoreAt: dir.path) }, "\(damaged.count) bytes were accepted")
        }
    }

    @Test("A store whose log directory was removed takes a new replica ID (lineage logLost) and commits under it")
    func logRemoved() async throws {
        let dir = StoreDirectory()
        let store = try await Store.open(at: dir.path, schema: notesSchema, options: storeOptions())
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "inbox"]) }
        let old = store.replicaID
        try await store.close()
        try FileManager.default.removeItem(atPath: Store.logDirectory(ofStoreAt: dir.path))
        try await expectNewReplica(dir.path, old: old)
    }

    @Test("strata init on a directory whose log was lost (manifest, format 1 or 2, and no log) gives a new replica ID")
    func manifestWithoutLog() async throws {
        for format in [1, 2] {
            let dir = StoreDirectory()
            let old = ReplicaID.random()
            let bytes = format == 1
                ? Array(#"{"format":1,"replicaID":"\#(old)"}"#.utf8)
                : try StoreIdentityFile.encode(StoreIdentity(replicaID: old, logID: String(repeating: "ab", count: 16)))
            try write(bytes, to: dir.path)
            try await expectNewReplica(dir.path, old: old)
        }
    }

    @Test("A store.json that names another log than the one beside it gives a new replica ID")
    func foreignLog() async throws {
        let dir = StoreDirectory()
        let a = try await Store.open(at: dir.sub("a"), schema: notesSchema, options: storeOptions())
        let b = try await Store.open(at: dir.sub("b"), schema: notesSchema, options: storeOptions())
        let old = a.replicaID
        try await a.close()
        try await b.close()
        try FileManager.default.removeItem(atPath: Store.logDirectory(ofStoreAt: dir.sub("a")))
        try FileManager.default.copyItem(atPath: Store.logDirectory(ofStoreAt: dir.sub("b")), toPath: Store.logDirectory(ofStoreAt: dir.sub("a")))
        try await expectNewReplica(dir.sub("a"), old: old)
    }

    func expectNewReplica(_ path: String, old: ReplicaID) async throws {
        let store = try await Store.open(at: path, schema: notesSchema, options: storeOptions())
        #expect(store.replicaID != old)
        let fork = store.identity.lineage.last
        #expect(fork?.reason == .logLost)
        #expect(fork?.replica == old && fork?.successor == store.replicaID)
        #expect(fork?.keptThrough == 0 && fork?.reauthored == 0)
        #expect(store.identity.logID == store.segmentLog.logID.description)
        try await store.transaction { tx in _ = try tx.insert("Folder", ["name": "after"]) }
        let own = try store.transactions().map(\.transaction)
        #expect(own.last?.replica == store.replicaID)
        #expect(!own.contains { $0.replica == old }, "nothing is authored under the old replica ID")
        try await store.close()
        #expect(try Store.identity(ofStoreAt: path) == store.identity)
        let reopened = try await Store.open(at: path, schema: notesSchema, options: storeOptions())
        #expect(reopened.replicaID == store.replicaID, "the new identity is durable")
        try await reopened.close()
    }
}
