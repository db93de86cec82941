import AsyncHTTPClient
import StrataSyncAsyncHTTPClient
import Foundation
import Hummingbird
import NIOHTTP1
import HummingbirdTesting
@_spi(StrataInternals) import Strata
import StrataServer
@testable import StrataSync
import StrataTestSupport
import Testing
import StrataProtocol
import StrataCore
import StrataLog

/// The four ways sync used to lose or leak data while reporting success, each through a real
/// server on a real port with the real HTTP client: the attack is refused or healed, nothing
/// acknowledged is lost, honest devices converge, and zones the attack did not touch keep their
/// digest.
@Suite("Sync trust end to end: spoofed replicas, copied stores, zone names, clocks")
struct TrustEndToEndTests {
    static let users = ["alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"]

    func open(_ path: String, clock: (@Sendable () -> UInt64)? = nil) async throws -> Store {
        var options = StoreOptions(durability: .groupCommit)
        if let clock { options.clock = clock }
        return try await Store.open(at: path, schema: deviceSchema, options: options)
    }

    /// The digest of a zone as a fresh device of `user` sees it.
    func zoneDigest(_ url: URL, _ dir: TemporaryDirectory, zone: String, owner: String? = nil, as user: String) async throws -> String {
        let fresh = try await open(dir.sub("probe-\(UUID())"))
        try await SyncEngine(store: fresh, server: url, zone: zone, owner: owner, credentials: Self.users[user] ?? "").sync()
        let digest = fresh.digest()
        try await fresh.close()
        return digest
    }

    @Test("A device whose clock is two hours behind is told in its sync status (and its edit after pulling still wins); a device on time is not")
    func clockBehindIsReported() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let lag: UInt64 = 2 * 3_600_000
            let onTime = try await open(dir.sub("on-time"))
            let behind = try await open(dir.sub("behind"), clock: { HybridClock.wallMilliseconds() - lag })
            var late = SyncOptions()
            late.wallClock = { HybridClock.wallMilliseconds() - lag }
            let onTimeEngine = try SyncEngine(store: onTime, server: url, zone: "notes", credentials: "alice-secret")
            let behindEngine = try SyncEngine(store: behind, server: url, zone: "notes", credentials: "alice-secret", options: late)
            let note = try await onTime.transaction { tx in try tx.insert("Note", ["title": "from the phone"]) }
            try await onTimeEngine.sync()
            try await behindEngine.sync()
            let reported = try #require(await behindEngine.currentStatus.clockBehind, "the device two hours behind was not told")
            #expect(reported > .seconds(7000) && reported < .seconds(7400), "reported \(reported)")
            try await behind.transaction { tx in try tx.update(note, ["title": "from the slow laptop"]) }
            try await behindEngine.sync()
            try await onTimeEngine.sync()
            #expect(await onTimeEngine.currentStatus.clockBehind == nil)
            #expect(onTime.fetch("Note").first?["title"].stringValue == "from the slow laptop")
            #expect(onTime.digest() == behind.digest())
            try await onTime.close()
            try await behind.close()
        }
    }

    @Test("A grantee pushing the owner's replica is refused (403 replicaNotYours); the owner's later commits are all stored")
    func spoofedReplica() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let owner = try await open(dir.sub("owner"))
            let engine = try SyncEngine(store: owner, server: url, zone: "notes", credentials: "alice-secret")
            try await engine.sync()
            let admin = HTTPSyncTransport(server: url, bearer: "alice-secret")
            try await admin.share("notes", with: "bob", .readWrite)
            try await owner.transaction { tx in _ = try tx.insert("Folder", ["name": "mine"]) }
            try await engine.sync()
            // A zone the attack does not touch.
            let other = try SyncEngine(store: owner, server: url, zone: "other", credentials: "alice-secret")
            try await other.sync()
            let otherDigest = try await zoneDigest(url, dir, zone: "other", as: "alice")

            // Bob pushes under alice's replica ID, sequences far ahead of hers.
            let acknowledged = await engine.currentCursor.acknowledged
            let forged = TransactionRecord(replica: owner.replicaID, events: (1...3).map { offset in
                Event(id: EventID(replica: owner.replicaID, sequence: acknowledged + UInt64(offset)), hlc: HLC(milliseconds: 1_700_000_000_000, counter: UInt16(offset)),
                      change: .insert(entity: "Folder", object: ObjectID(), fields: ["name": .string("forged")]))
            })
            let bob = HTTPSyncTransport(server: url, bearer: "bob-secret")
            await #expect {
                _ = try await bob.push(zone: ZoneReference("notes", owner: "alice"), transactions: [forged.encoded()])
            } throws: { ($0 as? SyncError)?.code == .replicaNotYours && ($0 as? SyncError)?.status == 403 }

            // Alice's next three commits all reach the zone.
            for i in 0..<3 { try await owner.transaction { tx in _ = try tx.insert("Folder", ["name": .string("after \(i)")]) } }
            let report = try await engine.sync()
            #expect(report.pushedTransactions == 3)
            #expect(report.forks.isEmpty)
            let zone = try await zoneDigest(url, dir, zone: "notes", owner: "alice", as: "bob")
            #expect(zone == owner.digest())
            #expect(try await zoneDigest(url, dir, zone: "other", as: "alice") == otherDigest)
            // The zone says who pushed each replica, and the device learned it.
            let authors = try await admin.replicas(zone: ZoneReference("notes"))
            #expect(authors.first { $0.replica == owner.replicaID }?.user == "alice")
            #expect(authors.filter { $0.user == "bob" }.count <= 1, "only bob's own probe device is his")
            #expect(owner.authors()[owner.replicaID] == "alice")
            try await owner.close()
        }
    }

    @Test("A copied store with offline edits on both copies: both sets of edits reach the zone, two replica IDs, lineage recorded", arguments: [false, true])
    func copiedStore(copyFirst: Bool) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let original = try await open(dir.sub("a"))
            let folder = try await original.transaction { tx in try tx.insert("Folder", ["name": "shared"]) }
            try await SyncEngine(store: original, server: url, zone: "notes", credentials: "alice-secret").sync()
            // Unpushed work at copy time, then the copy (a restored backup, a migrated phone).
            try await original.transaction { tx in _ = try tx.insert("Note", ["title": "before the copy", "folder": .reference(folder)]) }
            try await original.close()
            try FileManager.default.copyItem(atPath: dir.sub("a"), toPath: dir.sub("b"))
            let a = try await open(dir.sub("a"))
            let b = try await open(dir.sub("b"))
            #expect(a.replicaID == b.replicaID)

            // Different offline edits on each copy, including to-many adds and a remove of its own add.
            for (store, name) in [(a, "a"), (b, "b")] {
                try await store.transaction { tx in
                    let note = try tx.insert("Note", ["title": .string("from \(name)"), "folder": .reference(folder)])
                    let tag = try tx.insert("Tag", ["label": .string("tag \(name)")])
                    try tx.add(note, "tags", tag)
                }
                try await store.transaction { tx in try tx.update(folder, ["name": .string("renamed by \(name)")]) }
            }
            let engineA = try SyncEngine(store: a, server: url, zone: "notes", credentials: "alice-secret")
            let engineB = try SyncEngine(store: b, server: url, zone: "notes", credentials: "alice-secret")
            let order = copyFirst ? [(b, engineB), (a, engineA)] : [(a, engineA), (b, engineB)]
            let first = try await order[0].1.sync()
            let second = try await order[1].1.sync()
            #expect(first.forks.isEmpty)
            #expect(second.forks.count == 1)
            for (_, engine) in order { try await engine.sync() }

            #expect(a.digest() == b.digest())
            #expect(a.replicaID != b.replicaID)
            #expect(Set(a.fetch("Note").compactMap { $0["title"].stringValue }) == ["before the copy", "from a", "from b"])
            #expect(Set(a.fetch("Tag").compactMap { $0["label"].stringValue }) == ["tag a", "tag b"])
            let forked = order[1].0
            let lineage = forked.identity.lineage
            #expect(lineage.count == 1)
            #expect(lineage.first?.successor == forked.replicaID)
            #expect(lineage.first?.replica == order[0].0.replicaID)
            #expect(try await zoneDigest(url, dir, zone: "notes", as: "alice") == a.digest())
            // Reopened, the forked copy keeps its new identity and state.
            let digest = forked.digest()
            let path = forked.directory
            try await a.close()
            try await b.close()
            let reopened = try await open(path)
            #expect(reopened.digest() == digest)
            #expect(reopened.identity.lineage == lineage)
            try await reopened.close()
        }
    }

    @Test("A store whose log was lost takes a new replica ID: its new commits are pushed, not mistaken for old ones")
    func lostLog() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            var device = try await open(dir.sub("device"))
            for i in 0..<3 { try await device.transaction { tx in _ = try tx.insert("Folder", ["name": .string("f\(i)")]) } }
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            let old = device.replicaID
            try await device.close()
            try FileManager.default.removeItem(atPath: Store.logDirectory(ofStoreAt: dir.sub("device")))
            device = try await open(dir.sub("device"))
            #expect(device.replicaID != old)
            #expect(device.identity.lineage.last?.reason == .logLost)
            try await device.transaction { tx in _ = try tx.insert("Folder", ["name": "after the loss"]) }
            let report = try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(report.pushedTransactions >= 1)
            #expect(device.fetch("Folder").count == 4)
            #expect(try await zoneDigest(url, dir, zone: "notes", as: "alice") == device.digest())
            try await device.close()
        }
    }

    @Test("A zone name taken by another user is not adopted: the device syncs into its own zone, and into the other only when it names the owner")
    func zoneNameTaken() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            // Bob creates "notes" first and shares it read-write with alice.
            let bobs = try await open(dir.sub("bob"))
            try await bobs.transaction { tx in _ = try tx.insert("Folder", ["name": "bob's"]) }
            try await SyncEngine(store: bobs, server: url, zone: "notes", credentials: "bob-secret").sync()
            try await HTTPSyncTransport(server: url, bearer: "bob-secret").share("notes", with: "alice", .readWrite)
            let bobsDigest = try await zoneDigest(url, dir, zone: "notes", as: "bob")

            // Alice syncs her private notes to "notes": her own zone, not bob's.
            let alices = try await open(dir.sub("alice"))
            try await alices.transaction { tx in _ = try tx.insert("Folder", ["name": "alice's private"]) }
            try await SyncEngine(store: alices, server: url, zone: "notes", credentials: "alice-secret").sync()
            #expect(alices.fetch("Folder").map { $0["name"].stringValue } == ["alice's private"])
            #expect(try await zoneDigest(url, dir, zone: "notes", as: "bob") == bobsDigest)
            let zones = try await HTTPSyncTransport(server: url, bearer: "alice-secret").zoneOwners()
            #expect(zones == ["alice/notes", "bob/notes"])

            // Naming the owner joins bob's zone.
            let joined = try await open(dir.sub("alice-joins-bob"))
            try await SyncEngine(store: joined, server: url, zone: "notes", owner: "bob", credentials: "alice-secret").sync()
            #expect(joined.digest() == bobsDigest)
            // Another user's zone is never created by naming it.
            await #expect {
                try await SyncEngine(store: joined, server: url, zone: "nothing", owner: "bob", credentials: "alice-secret").sync()
            } throws: { ($0 as? SyncError)?.code == .zoneNotFound }
            for store in [bobs, alices, joined] { try await store.close() }
        }
    }

    @Test("A device whose clock is in the future keeps its edits and is told why (clockSkew); once its clock is right they sync and do not pin the field")
    func clockFromTheFuture() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), users: Self.users) { url, _ in
            let honest = try await open(dir.sub("honest"))
            let folder = try await honest.transaction { tx in try tx.insert("Folder", ["name": "start"]) }
            let honestEngine = try SyncEngine(store: honest, server: url, zone: "notes", credentials: "alice-secret")
            try await honestEngine.sync()

            // A device that synced once, then had its clock set to the year 2400.
            var skewed = try await open(dir.sub("skewed"))
            try await SyncEngine(store: skewed, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await skewed.close()
            let future: UInt64 = 13_569_465_600_000
            skewed = try await open(dir.sub("skewed"), clock: { future })
            var skewedEngine = try SyncEngine(store: skewed, server: url, zone: "notes", credentials: "alice-secret")
            try await skewed.transaction { tx in try tx.update(folder, ["name": "from the future"]) }
            await #expect {
                try await skewedEngine.sync()
            } throws: { ($0 as? SyncError)?.code == .clockSkew && ($0 as? SyncError)?.serverTime != nil }
            let status = await skewedEngine.statusUpdates().first { _ in true }
            #expect(status?.lastError?.code == .clockSkew)
            // Nothing reached the zone; the edit is still on the device.
            #expect(try await zoneDigest(url, dir, zone: "notes", as: "alice") == honest.digest())
            #expect(skewed.object(folder)?["name"].stringValue == "from the future")

            // A raw push of the largest timestamp is refused too.
            let stranger = ReplicaID.random()
            let extreme = TransactionRecord(replica: stranger, events: [Event(
                id: EventID(replica: stranger, sequence: 1), hlc: HLC(rawValue: .max),
                change: .update(entity: "Folder", object: folder, fields: ["name": .string("pinned")]))])
            await #expect {
                _ = try await HTTPSyncTransport(server: url, bearer: "alice-secret").push(zone: ZoneReference("notes"), transactions: [extreme.encoded()])
            } throws: { ($0 as? SyncError)?.code == .clockSkew }

            // The clock is fixed: the pending edit is re-stamped and pushed.
            try await skewed.close()
            skewed = try await open(dir.sub("skewed"))
            skewedEngine = try SyncEngine(store: skewed, server: url, zone: "notes", credentials: "alice-secret")
            let healed = try await skewedEngine.sync()
            #expect(healed.forks.map(\.reason) == [.clockRestamp])
            try await honestEngine.sync()
            #expect(honest.object(folder)?["name"].stringValue == "from the future")
            // A later honest edit wins: nothing is pinned by a timestamp from the future.
            try await Task.sleep(for: .milliseconds(5))
            try await honest.transaction { tx in try tx.update(folder, ["name": "later"]) }
            try await honestEngine.sync()
            try await skewedEngine.sync()
            #expect(skewed.object(folder)?["name"].stringValue == "later")
            #expect(skewed.digest() == honest.digest())
            try await honest.close()
            try await skewed.close()
        }
    }
}

@Suite("Sync cursor damage end to end")
struct CursorDamageTests {
    @Test("a damaged sync cursor (garbage, cut short, a changed token or acknowledged count, an acknowledged count raised with its checksum recomputed) is rebuilt from the server or checked against it: nothing is skipped, nothing held back", arguments: ["garbage", "truncated", "token", "acknowledged", "acknowledged, checksum recomputed"])
    func damagedCursorHeals(damage: String) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url, _ in
            let device = try await Store.open(at: dir.sub("device"), schema: deviceSchema)
            let other = try await Store.open(at: dir.sub("other"), schema: deviceSchema)
            try await device.transaction { tx in _ = try tx.insert("Folder", ["name": "before"]) }
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            let otherEngine = try SyncEngine(store: other, server: url, zone: "notes", credentials: "alice-secret")
            try await otherEngine.sync()

            let path = device.directory + "/sync-notes.json"
            var text = try String(contentsOfFile: path, encoding: .utf8)
            switch damage {
            case "garbage": text = "{\u{0}not a cursor"
            case "truncated": text = String(text.prefix(text.count / 2))
            case "token":
                // The token moved: without the checksum the device would skip whatever lies between.
                let fields = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                let token = try #require(fields["token"] as? String)
                text = text.replacingOccurrences(of: token, with: String(token.reversed()))
            case "acknowledged":
                text = text.replacingOccurrences(of: "\"acknowledged\":", with: "\"acknowledged\":9")
            default:
                // A hand edit that passes the file's own check: only the server knows better.
                var fields = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                let acknowledged = try #require(fields["acknowledged"] as? Int) + 1000
                fields["acknowledged"] = acknowledged
                let summed = [fields["token"] as? String ?? "", String(acknowledged), fields["replica"] as? String ?? "", fields["logID"] as? String ?? ""]
                fields["checksum"] = String(CRC32C.checksum(Array(summed.joined(separator: "\n").utf8)), radix: 16)
                text = String(decoding: try JSONSerialization.data(withJSONObject: fields), as: UTF8.self)
            }
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            if damage == "acknowledged, checksum recomputed" {
                let read = SyncCursor.cursors(inStoreAt: device.directory).first { $0.file == "sync-notes.json" }?.cursor
                #expect(read != nil && read!.acknowledged > 1000, "the edited cursor does not pass the file's own check: the test would not test the server check")
            }

            // Meanwhile: an edit from the other device, and local edits.
            try await other.transaction { tx in _ = try tx.insert("Folder", ["name": "from the other device"]) }
            try await otherEngine.sync()
            try await device.transaction { tx in _ = try tx.insert("Folder", ["name": "after"]) }
            try await SyncEngine(store: device, server: url, zone: "notes", credentials: "alice-secret").sync()
            try await otherEngine.sync()
            #expect(Set(device.fetch("Folder").compactMap { $0["name"].stringValue }) == ["before", "after", "from the other device"])
            #expect(device.digest() == other.digest())
            try await device.close()
            try await other.close()
        }
    }
}

extension HTTPSyncTransport {
    /// Shares one of the caller's zones with `user`.
    func share(_ zone: String, with user: String, _ grant: ZoneGrant) async throws {
        try await setAccess(zone, #"{"access": "shared", "grants": {"\#(user)": "\#(grant.rawValue)"}}"#)
    }

    /// `owner/name` of every zone the caller may read.
    func zoneOwners() async throws -> [String] {
        let body = try await send(HTTPExchangeRequest(method: "GET", url: url("v1/zones"))).body
        return try JSONDecoder().decode(ZoneList.self, from: Data(body)).zones.map { "\($0.owner)/\($0.name)" }
    }
}
