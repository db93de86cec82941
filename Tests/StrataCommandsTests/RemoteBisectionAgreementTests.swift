import Foundation
@_spi(StrataInternals) import Strata
@testable import StrataCommands
import StrataCore
import StrataServer
import StrataSync
import StrataTestSupport
import Testing

/// Remote bisection (`strata diff STORE --server URL --zone Z`, digests only) names the same
/// first divergent event, and the same differing objects, as a full local diff (`strata diff
/// STORE COPY --full`) of the device against a store that pulled the whole zone — on seeded
/// divergences of each kind, every seed.
@Suite("Remote bisection agrees with a full local diff")
struct RemoteBisectionAgreementTests {
    /// How a seed makes the device and the zone part.
    enum Divergence: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Edits the device has not pushed, and edits of another device it has not pulled.
        case missingEvents
        /// An event of another device that reached this one with a value changed on the way (a
        /// relay's bug, a bit flipped past every check): one ID, two contents.
        case corruptedValue
        /// A store made with the device's replica ID (a copy restored elsewhere), with its own
        /// edits: the replica's sequences mean other events.
        case forkedReplica
        /// The device and the zone compacted at different points, and edits on both sides since.
        case compactionPoints
        /// All of the above at once.
        case everything

        var testDescription: String { rawValue }
    }

    /// Notes in folders (a to-one with a derived to-many inverse: a note moved changes what both
    /// folders read), with tags, a default-valued attribute and a local-only one.
    static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, default: "")],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder")])
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("body", .string),
                                    Attribute("pinned", .bool, default: false), Attribute("draft", .string, localOnly: true)],
               relationships: [Relationship("folder", to: "Folder", inverse: "notes"), Relationship("tags", to: "Tag", toMany: true)])
        Entity("Tag", attributes: [Attribute("label", .string, default: "")])
    }
    static let zone = ZoneReference("notes")
    static let token = "alice-secret"

    /// Seeds per kind (the seeds are printed with any disagreement).
    static let seedsPerKind = 6

    @Test("remote and local diffs name the same first divergent event and the same differing objects", arguments: Divergence.allCases)
    func agreement(kind: Divergence) async throws {
        let base = UInt64.random(in: 1...UInt64.max / 2)
        var sides: Set<String> = []
        for seed in base..<base + UInt64(Self.seedsPerKind) {
            if let side = try await run(kind, seed: seed) { sides.insert(side) }
        }
        // Each side of the comparison came first in some seeds: an event only the zone holds
        // (ordered by the HLC the server sends), one only the device holds, one both hold.
        switch kind {
        case .missingEvents: #expect(sides == ["device", "zone"], "seeds \(base)…: \(sides)")
        case .corruptedValue, .forkedReplica: #expect(sides == ["both"], "seeds \(base)…: \(sides)")
        case .compactionPoints, .everything: #expect(!sides.isEmpty)
        }
    }

    func open(_ path: String, replica: ReplicaID? = nil) async throws -> Store {
        var options = StoreOptions(durability: .buffered)
        options.newReplicaID = replica
        return try await Store.open(at: path, schema: Self.schema, options: options)
    }

    /// `count` transactions of random inserts and updates of `store`'s notes: new folders and
    /// tags, notes moved between folders, tagged, renamed, pinned, and local-only drafts.
    func write(_ store: Store, _ label: String, count: Int, rng: inout SeededGenerator) async throws {
        for i in 0..<count {
            let notes = store.fetch("Note").map(\.id).sorted()
            let folders = store.fetch("Folder").map(\.id).sorted()
            let tags = store.fetch("Tag").map(\.id).sorted()
            let newFolder = folders.isEmpty || rng.next() % 4 == 0
            let newTag = tags.isEmpty || rng.next() % 4 == 0
            let inserts = (0..<1 + Int(rng.next() % 2)).map { _ in (folder: Int(rng.next() % 64), tagged: rng.next() % 3 == 0) }
            let edits = (0..<(notes.isEmpty ? 0 : Int(rng.next() % 3))).map { _ in
                (note: notes[Int(rng.next() % UInt64(notes.count))], kind: Int(rng.next() % 4), folder: Int(rng.next() % 64))
            }
            try await store.transaction { tx in
                var folderIDs = folders
                if newFolder { folderIDs.append(try tx.insert("Folder", ["name": .string("\(label) folder \(i)")])) }
                var tagIDs = tags
                if newTag { tagIDs.append(try tx.insert("Tag", ["label": .string("\(label) tag \(i)")])) }
                for (j, insert) in inserts.enumerated() {
                    let note = try tx.insert("Note", ["title": .string("\(label) \(i).\(j)"), "body": .string("body \(i)"), "draft": .string("draft \(i)"),
                                                      "folder": .reference(folderIDs[insert.folder % folderIDs.count])])
                    if insert.tagged { try tx.add(note, "tags", tagIDs[insert.folder % tagIDs.count]) }
                }
                for edit in edits {
                    switch edit.kind {
                    case 0: try tx.update(edit.note, ["title": .string("\(label) edit \(i)")])
                    case 1: try tx.update(edit.note, ["folder": .reference(folderIDs[edit.folder % folderIDs.count])])
                    case 2: try tx.update(edit.note, ["pinned": .bool(true), "draft": .string("\(label) draft \(i)")])
                    default: try tx.add(edit.note, "tags", tagIDs[edit.folder % tagIDs.count])
                    }
                }
            }
        }
    }

    func sync(_ store: Store, _ url: URL) async throws {
        let report = try await SyncEngine(store: store, server: url, zone: "notes", credentials: Self.token).sync()
        #expect(report.leftToPush == 0)
    }

    /// One seed: the side holding the first divergent event, as the remote diff named it.
    func run(_ kind: Divergence, seed: UInt64) async throws -> String? {
        var rng = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        var named: String?
        try await withLogServer(dir.sub("server"), users: try UserDirectory(tokens: ["alice": Self.token])) { url, storage in
            let phone = try await open(dir.sub("phone"))
            let tablet = try await open(dir.sub("tablet"))
            // A shared history, synced both ways.
            try await write(phone, "phone", count: 2 + Int(rng.next() % 6), rng: &rng)
            try await sync(phone, url)
            try await write(tablet, "tablet", count: 1 + Int(rng.next() % 6), rng: &rng)
            try await sync(tablet, url)
            try await sync(phone, url)

            var device = phone
            var others: [Store] = [tablet]
            let all = kind == .everything
            if kind == .compactionPoints || all {
                try await write(phone, "phone", count: 1 + Int(rng.next() % 4), rng: &rng)
                try await sync(phone, url)
                _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: rng.next() % 6)
                _ = try await phone.compact()
                try await write(tablet, "tablet", count: 1 + Int(rng.next() % 3), rng: &rng)
                try await sync(tablet, url)
            }
            if kind == .corruptedValue || all {
                try await write(tablet, "tablet", count: 1 + Int(rng.next() % 3), rng: &rng)
                try await sync(tablet, url)
                let sent = try tablet.transactions(forSync: true).map(\.transaction).filter { $0.replica == tablet.replicaID }
                let pick = try #require(sent.last(where: { $0.events.contains(where: Self.hasTitle) }))
                var altered = pick
                let at = try #require(altered.events.lastIndex(where: Self.hasTitle))
                altered.events[at].change = Self.retitled(altered.events[at].change, "changed on the way \(seed)")
                _ = try await phone.applyRemote([altered])
                try await sync(phone, url)
            }
            if kind == .missingEvents || all {
                // Odd seeds: the other device's edits come first in the merge order; even ones,
                // the device's own.
                if seed % 2 == 1 {
                    try await write(tablet, "tablet", count: 1 + Int(rng.next() % 4), rng: &rng)
                    try await sync(tablet, url)
                }
                try await write(phone, "phone unpushed", count: 1 + Int(rng.next() % 4), rng: &rng)
                if seed % 2 == 0 {
                    try await write(tablet, "tablet", count: 1 + Int(rng.next() % 4), rng: &rng)
                    try await sync(tablet, url)
                }
            }
            if kind == .forkedReplica || all {
                let fork = try await open(dir.sub("fork"), replica: phone.replicaID)
                try await write(fork, "fork", count: 1 + Int(rng.next() % 5), rng: &rng)
                others.append(phone)
                device = fork
                if rng.next() % 2 == 0 {
                    try await write(phone, "phone", count: 1 + Int(rng.next() % 3), rng: &rng)
                    try await sync(phone, url)
                }
            }

            // The zone as a store: a fresh device that pulled all of it.
            let copy = try await open(dir.sub("zone-copy"))
            try await sync(copy, url)
            let devicePath = device === phone ? dir.sub("phone") : dir.sub("fork")
            for store in others + [device, copy] { try await store.close() }

            let local = try StoreDiff.run(devicePath, dir.sub("zone-copy"), full: true, progress: nil)
            let remote = try await RemoteDiff.run(devicePath, transport: HTTPSyncTransport(server: url, bearer: Self.token), zone: Self.zone,
                                                  mask: .none, limit: 1000, progress: nil)
            let context = "\(kind), seed \(seed): local \(local.firstDivergent.map { "\($0.heldBy) \($0.replica.prefix(8)) #\($0.sequence)" } ?? "none"), remote \(remote.firstDivergent.map { "\($0.heldBy ?? "?") \($0.replica.prefix(8)) #\($0.sequence)" } ?? "none"); remote warnings: \(remote.warnings)"
            let first = try #require(local.firstDivergent, "the local diff found no divergence: \(context)")
            #expect(remote.firstDivergent?.replica == first.replica && remote.firstDivergent?.sequence == first.sequence, "\(context)")
            #expect(remote.firstDivergent?.heldBy == Self.remoteSide(first.heldBy), "\(context)")
            #expect(!remote.equal, "\(context)")
            // The objects: remote state bisection against every object of the local diff.
            let state = try #require(remote.state, "no state comparison: \(context)")
            #expect(Set(state.differing) == Set(local.objects.filter { $0.existsInA && $0.existsInB }.map(\.object)), "\(context): differing objects")
            #expect(Set(state.onlyOnDevice) == Set(local.objects.filter { $0.existsInA && !$0.existsInB }.map(\.object)), "\(context): objects only on the device")
            #expect(Set(state.onlyInZone) == Set(local.objects.filter { !$0.existsInA && $0.existsInB }.map(\.object)), "\(context): objects only in the zone")
            #expect(!state.isEmpty || local.objects.isEmpty, "\(context)")
            named = remote.firstDivergent?.heldBy
        }
        return named
    }

    /// The local diff's side ("a": the device, "b": the zone's copy) as the remote one names it.
    static func remoteSide(_ local: String) -> String {
        switch local {
        case "a": "device"
        case "b": "zone"
        default: "both"
        }
    }

    static func hasTitle(_ event: Event) -> Bool {
        switch event.change {
        case .insert(_, _, let fields), .update(_, _, let fields): fields["title"] != nil
        default: false
        }
    }

    static func retitled(_ change: Change, _ title: String) -> Change {
        switch change {
        case .insert(let entity, let object, var fields):
            fields["title"] = .string(title)
            return .insert(entity: entity, object: object, fields: fields)
        case .update(let entity, let object, var fields):
            fields["title"] = .string(title)
            return .update(entity: entity, object: object, fields: fields)
        default:
            return change
        }
    }
}
