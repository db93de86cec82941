import Foundation
import Strata
import StrataCore
@testable import StrataCommands
import StrataTestSupport
import Testing

/// The state digest (`Store.digest()`) is compared across versions: a device on one release
/// reports it to a server on another, which computes the zone's at the same position and flags
/// the device when they differ. The per-object state fingerprints (``StateDigests``) are too: a
/// remote state bisection compares a device's with a server's. So both are pinned here for
/// committed stores. The values were computed by release 0.16.0 before its digests were made
/// faster; a change to either canonical encoding must fail this test.
@Suite("the state digest's value is pinned")
struct StateDigestGoldenTests {
    struct Pinned: Sendable, CustomTestStringConvertible {
        /// The store, under Fixtures/.
        var store: String
        /// `Store.digest()`.
        var digest: String
        /// The sum of every object's state fingerprint (count:sum), as a state bisection's first
        /// question compares it.
        var stateSum: String
        var testDescription: String { store }
    }

    /// `digest/rich-store` holds every kind of field the digest encodes: defaults, optionals, a
    /// local-only attribute (left out), a to-one with its derived to-many inverse, a
    /// many-to-many, deleted objects and a cascade (Fixtures/README.md).
    static let pinned: [Pinned] = [
        Pinned(store: "divergent/device-a", digest: "0d5bd98976f52a4e618faf89e0bfd50b1803c985281979eef1a182323d22393c",
               stateSum: "44:5b4591ed913919970e9385b6a694a52b"),
        Pinned(store: "divergent/device-b", digest: "bcab8174d0099d532b812cf55f0ef60f0f8743c5be1c87c720a9228a34cc43e6",
               stateSum: "45:78277031d59b36daf225638dcd5a4ee4"),
        Pinned(store: "adopted/device-d", digest: "0fb79e64d4b48e89e2f86f9f22bf433d46479b6c377c85814885ab6c4cc018a1",
               stateSum: "45:335b2116cd55e65003904cf0df235f83"),
        Pinned(store: "digest/rich-store", digest: "5bec289db8a1432428ade19bc5879a3a2f4eb3215b8ce586d02f28fd1f2bbfdb",
               stateSum: "313:7e75f4853df6f69e233d1341d8ac1a25"),
    ]

    @Test("every committed store has its pinned digest (by the store, a view, a reader and a replay) and its pinned sum of object fingerprints",
          arguments: Self.pinned)
    func pinnedDigests(_ pinned: Pinned) async throws {
        let name = pinned.store
        let dir = TemporaryDirectory()
        let path = try FixturePaths.copy(FixturePaths.root + "/" + name, to: dir, as: "store")
        let replay = try LoadedStore.load(try StoreFiles(path), start: .earliest)
        #expect(replay.projection.digest() == pinned.digest, "\(name): a replay of the whole log")
        let reader = try StoreReader.open(at: path)
        #expect(reader.digest() == pinned.digest, "\(name): a read-only reader")
        let store = try await Store.open(at: path)
        #expect(store.digest() == pinned.digest, "\(name): the store")
        #expect(store.read { $0.digest() } == pinned.digest, "\(name): a view of the store")
        let state = store.stateDigests()
        try await store.close()
        let whole = state.digest(ObjectID(rawValue: 0)...ObjectID(rawValue: .max))
        #expect(whole.description == pinned.stateSum, "\(name): the sum of \(state.count) object fingerprints")
        #expect(Int(whole.count) == state.count)
    }
}
