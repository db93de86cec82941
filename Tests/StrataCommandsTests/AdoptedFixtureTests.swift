import DivergentStores
import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataLog
import StrataTestSupport
import Testing
import StrataCore

/// `Fixtures/adopted/device-d`: a store whose log records an adoption (see Fixtures/README.md),
/// read by the tools, by a reader and by the store itself; the adoption record's layout pinned.
@Suite("the adopted-state fixture: its adoption record, and every reader replays it where it was adopted")
struct AdoptedFixtureTests: NoteStoreCLI {
    static let store = FixturePaths.root + "/adopted/device-d"

    func record(in store: String) throws -> (position: UInt64, record: AdoptionRecord) {
        var found: [(UInt64, AdoptionRecord)] = []
        _ = try StoreFiles(store).scan(progress: nil) { entry in
            if AdoptionRecord.isAdoption(entry.payload) {
                found.append((entry.position, try AdoptionRecord(decoding: entry.payload, position: entry.position)))
            }
        }
        try #require(found.count == 1)
        return found[0]
    }

    @Test("the record names the adopted state by its SHA-256 and size, carries the state's digest and where it came from, and its bytes round-trip")
    func recordLayout() throws {
        let (position, record) = try record(in: Self.store)
        #expect(position == 3)
        let file = Self.store + "/adopted/" + record.contentHash + ".state"
        let payload = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        #expect(UInt64(payload.count) == record.size)
        #expect(AdoptionRecord.contentHash(of: payload) == record.contentHash)
        // The state digest is the digest of the adopted state alone: device A's.
        #expect(record.stateDigest == (try ProjectionBuilder(snapshot: payload)).digest())
        #expect(record.origin.hasPrefix("zone alice/notes snapshot"))
        let bytes = record.encoded()
        #expect(bytes.first == 2)
        #expect(try AdoptionRecord(decoding: bytes) == record)
        // A transaction header reads it as no events of no replica.
        let header = try TransactionHeader(decoding: bytes)
        #expect(header.isAdoption && header.eventCount == 0 && header.replica == ReplicaID(rawValue: 0))
        // Truncated or with trailing bytes: refused, naming the position.
        for bad in [Array(bytes.dropLast()), bytes + [0]] {
            #expect(throws: StoreError.self) { try AdoptionRecord(decoding: bad, position: 3) }
        }
    }

    @Test("verify passes; replay before the adoption shows the store's own state, from it on the merged one; blame names the original events; the store and a reader load the same state")
    func everyReaderAgrees() async throws {
        let dir = TemporaryDirectory()
        let d = try FixturePaths.copy(Self.store, to: dir, as: "d")
        let verified = try Verification.run(try StoreFiles(d), progress: nil)
        #expect(verified.healthy, "\(verified.text)")
        let before = try ReplayState.run(try StoreFiles(d), until: .position(2), entity: nil, progress: nil)
        #expect(before.objects.map(\.id) == [AdoptedStore.mine.description])
        let after = try ReplayState.run(try StoreFiles(d), until: .position(3), entity: "Note", progress: nil)
        #expect(after.objects.count > 1)
        // Blame of A's notes as A's own log tells it.
        let a = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        let onA = try ObjectHistory.run(try StoreFiles(a), object: DivergentStores.recipes, until: nil, progress: nil)
        let onD = try ObjectHistory.run(try StoreFiles(d), object: DivergentStores.recipes, until: nil, progress: nil)
        #expect(onD.exists && !onA.blame.isEmpty)
        #expect(onA.blame == onD.blame)
        // The store (from its snapshot past the adoption) and a read-only reader (the same), and a
        // whole replay of the log, agree.
        let whole = try LoadedStore.load(try StoreFiles(d), start: .earliest)
        let reader = try StoreReader.open(at: d)
        let opened = try await Store.open(at: d)
        #expect(opened.digest() == whole.projection.digest())
        #expect(reader.digest() == opened.digest())
        try await opened.close()
    }

    @Test("inspect counts the replicas of the adopted state and lists the adoption; diff against the device it came from names only the store's own events and shows the adoption in its timeline")
    func inspectAndDiff() async throws {
        let dir = TemporaryDirectory()
        let d = try FixturePaths.copy(Self.store, to: dir, as: "d")
        let a = try FixturePaths.copy(FixturePaths.deviceA, to: dir, as: "a")
        let inspected = try await strata(["inspect", d, "--json"])
        #expect(inspected.status == 0, "\(inspected.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(inspected.stdout.utf8)) as? [String: Any])
        let replicas = try #require(json["replicas"] as? [[String: Any]]).compactMap { $0["replica"] as? String }
        #expect(replicas.contains(DivergentStores.replicaA.description), "\(replicas)")
        #expect((json["adoptions"] as? [String])?.count == 1)
        #expect((json["problems"] as? [String])?.isEmpty == true)
        let diffed = try await strata(["diff", d, a, "--json"])
        #expect(diffed.status == 1, "\(diffed.stdout)\(diffed.stderr)")
        #expect(!diffed.stdout.contains("a1a10000-0000-0000-0000-000000000001\",\"sequence\""), "A's events must not be missing from D")
        #expect(diffed.stdout.contains("adopt zone alice/notes"), "\(diffed.stdout)")
    }

    @Test("a missing adopted state is a finding naming the file and the position; the store itself still opens from its snapshot")
    func missingState() async throws {
        let dir = TemporaryDirectory()
        let d = try FixturePaths.copy(Self.store, to: dir, as: "d")
        let (_, record) = try record(in: d)
        try FileManager.default.removeItem(atPath: d + "/adopted/" + record.contentHash + ".state")
        let verified = try Verification.run(try StoreFiles(d), progress: nil)
        #expect(!verified.healthy)
        #expect(verified.findings.first.map { "\($0)" }?.contains(record.contentHash) == true, "\(verified.text)")
        #expect(verified.findings.first?.position == 3, "\(verified.text)")
        let opened = try await Store.open(at: d)
        #expect(opened.fetch("Note").count > 1)
        try await opened.close()
    }
}
