@testable import StrataSync
import StrataProtocol
import Testing

/// How the pages of one database-changes answer add up: a zone's last appearance holds.
@Suite("Database changes over several pages")
struct DatabaseChangeBatchTests {
    static func listed(_ name: String, owner: String = "bob", token: String = "t1") -> DatabaseZone {
        DatabaseZone(name: name, owner: owner, access: .shared, role: .read, token: token, epoch: 1, accepted: true)
    }

    static func page(_ token: String, zones: [DatabaseZone] = [], removed: [RemovedZone] = [], more: Bool = true, reset: Bool = false) -> DatabaseChanges {
        DatabaseChanges(token: token, reset: reset, moreComing: more, zones: zones, removed: removed)
    }

    @Test("a zone listed on one page and removed on a later one (its grant taken while the pages were read) is removed, not kept")
    func removedAfterListed() {
        var batch = DatabaseChangeBatch(start: nil)
        batch.add(Self.page("p1", zones: [Self.listed("trip"), Self.listed("list")], reset: true))
        batch.add(Self.page("p2", removed: [RemovedZone(name: "trip", owner: "bob", reason: .revoked)], more: false))
        #expect(batch.zones.map(\.name) == ["list"])
        #expect(batch.removed == [RemovedZone(name: "trip", owner: "bob", reason: .revoked)])
        #expect(batch.reset)
        #expect(batch.token == "p2")
    }

    @Test("a zone removed on one page and listed on a later one (shared again) is listed once, with its latest token; within one page a listing outranks a removal")
    func listedAfterRemoved() {
        var batch = DatabaseChangeBatch(start: "t0")
        batch.add(Self.page("p1", zones: [Self.listed("trip", token: "a")], removed: [RemovedZone(name: "list", owner: "bob", reason: .deleted)]))
        batch.add(Self.page("p2", zones: [Self.listed("list", token: "b"), Self.listed("trip", token: "c")], more: false))
        #expect(batch.removed.isEmpty)
        #expect(Set(batch.zones.map { "\($0.name)@\($0.token)" }) == ["list@b", "trip@c"])
        #expect(!batch.reset)

        // The same zone of another owner is another zone.
        batch.add(Self.page("p3", removed: [RemovedZone(name: "trip", owner: "carol", reason: .revoked)], more: false))
        #expect(batch.zones.count == 2 && batch.removed.count == 1)
        // Listed and removed on one page: both kept, and `apply` lets the listing win.
        batch.add(Self.page("p4", zones: [Self.listed("x")], removed: [RemovedZone(name: "x", owner: "bob", reason: .revoked)], more: false))
        #expect(batch.zones.contains { $0.name == "x" } && batch.removed.contains { $0.name == "x" })
    }

    @Test("a full listing that begins on a later page (the token expired between pages) drops what the incremental pages before it said")
    func resetOnALaterPage() {
        var batch = DatabaseChangeBatch(start: "t0")
        batch.add(Self.page("p1", zones: [Self.listed("trip")], removed: [RemovedZone(name: "list", owner: "bob", reason: .revoked)]))
        batch.add(Self.page("p2", zones: [Self.listed("list")], reset: true))
        batch.add(Self.page("p3", zones: [Self.listed("notes")], more: false, reset: true))
        #expect(batch.reset)
        #expect(Set(batch.zones.map(\.name)) == ["list", "notes"], "a zone only the incremental page named is not in the listing")
        #expect(batch.removed.isEmpty)
        #expect(batch.start == "t0" && batch.token == "p3")
    }
}
