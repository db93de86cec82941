import Foundation
import Strata
import StrataCore
@testable import StrataCommands
import StrataTestSupport
import Testing

/// The state digest (`Store.digest()`) is compared across versions: a device on one release
/// reports it to a server on another, which computes the zone's at the same position and flags
/// the device when they differ. So its value for a given state is pinned here, for committed
/// stores, as every path computes it (the store, a view of it, a read-only reader, a replay of the
/// log). The values were computed by release 0.16.0 before its digest was made faster; a change
/// to the digest's canonical encoding must fail this test.
@Suite("the state digest's value is pinned")
struct StateDigestGoldenTests {
    /// Store (under Fixtures/) → its digest. `digest/rich-store` holds every kind of field the
    /// digest encodes: defaults, optionals, a local-only attribute (left out), a to-one with its
    /// derived to-many inverse, a many-to-many, deleted objects and a cascade (Fixtures/README.md).
    static let pinned: [(String, String)] = [
        ("divergent/device-a", "0d5bd98976f52a4e618faf89e0bfd50b1803c985281979eef1a182323d22393c"),
        ("divergent/device-b", "bcab8174d0099d532b812cf55f0ef60f0f8743c5be1c87c720a9228a34cc43e6"),
        ("adopted/device-d", "0fb79e64d4b48e89e2f86f9f22bf433d46479b6c377c85814885ab6c4cc018a1"),
        ("digest/rich-store", "5bec289db8a1432428ade19bc5879a3a2f4eb3215b8ce586d02f28fd1f2bbfdb"),
    ]

    @Test("every committed store has its pinned digest, by the store, a view, a reader and a replay", arguments: Self.pinned.indices)
    func pinnedDigest(index: Int) async throws {
        let (name, expected) = Self.pinned[index]
        let dir = TemporaryDirectory()
        let path = try FixturePaths.copy(FixturePaths.root + "/" + name, to: dir, as: "store")
        let replay = try LoadedStore.load(try StoreFiles(path), start: .earliest)
        #expect(replay.projection.digest() == expected, "\(name): a replay of the whole log")
        let reader = try StoreReader.open(at: path)
        #expect(reader.digest() == expected, "\(name): a read-only reader")
        let store = try await Store.open(at: path)
        #expect(store.digest() == expected, "\(name): the store")
        #expect(store.read { $0.digest() } == expected, "\(name): a view of the store")
        try await store.close()
    }

    /// The per-object state fingerprints (``StateDigests``, what a remote state bisection
    /// compares between a device and a server) are compared between releases too: their sum over
    /// every object (count and 128-bit sum) is pinned for the same stores, from release 0.16.0.
    static let pinnedStateSums: [(String, String)] = [
        ("divergent/device-a", "44:5b4591ed913919970e9385b6a694a52b"),
        ("divergent/device-b", "45:78277031d59b36daf225638dcd5a4ee4"),
        ("adopted/device-d", "45:335b2116cd55e65003904cf0df235f83"),
        ("digest/rich-store", "313:7e75f4853df6f69e233d1341d8ac1a25"),
    ]

    @Test("every committed store has its pinned sum of object fingerprints", arguments: Self.pinnedStateSums.indices)
    func pinnedStateDigests(index: Int) async throws {
        let (name, expected) = Self.pinnedStateSums[index]
        let dir = TemporaryDirectory()
        let path = try FixturePaths.copy(FixturePaths.root + "/" + name, to: dir, as: "store")
        let store = try await Store.open(at: path)
        let state = store.stateDigests()
        try await store.close()
        let whole = state.digest(ObjectID(rawValue: 0)...ObjectID(rawValue: .max))
        #expect(whole.description == expected, "\(name): the sum of \(state.count) object fingerprints")
        #expect(Int(whole.count) == state.count)
    }
}
