import Foundation
import Testing
import Synchronization
import StrataLog
@testable import Strata
@testable import StrataCore

/// A database: several zones (one store each) read and written together.
@Suite("Database: several zones in one store")
struct DatabaseTests {
    let own = ZoneReference("default")
    let work = ZoneReference("work")
    let groceries = ZoneReference("groceries", owner: "alice")

    func open(_ dir: StoreDirectory) async throws -> Database {
        try await Database.open(at: dir.path, schema: notesSchema, options: storeOptions())
    }

    @Test("inserts go to the zone they name (the default one otherwise), reads span every zone or the ones asked for, and all of it survives a reopen")
    func insertsAndReadsAcrossZones() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(work)
        try await db.addZone(groceries)
        let (a, b, c) = try await db.transaction { tx in
            (try tx.insert("Note", ["title": "private", "rank": 3]),
             try tx.insert("Note", ["title": "work", "rank": 1], in: work),
             try tx.insert("Note", ["title": "milk", "rank": 2], in: groceries))
        }
        #expect(db.zones == [own, work, groceries])
        #expect(try db.fetch("Note", sortedBy: [SortKey("rank")]).map(\.id) == [b, c, a])
        #expect(try db.fetch("Note", in: [groceries, work]).map { $0["title"] }.sorted { Value.ordered($0, $1) } == ["milk", "work"])
        #expect(try db.fetch("Note", sortedBy: [SortKey("rank", ascending: false)], limit: 2).map(\.id) == [a, c])
        #expect(db.zone(of: c) == groceries)
        #expect(db.store(for: groceries)?.object(c)?["title"] == "milk")
        #expect(db.store(for: own)?.object(c) == nil, "each zone's store holds only its own objects")
        #expect(try db.read { $0.count("Note", in: [own]) } == 1)
        #expect { try db.fetch("Note", in: [ZoneReference("nope")]) } throws: { ($0 as? StoreError)?.code == .unknownZone }
        try await db.close()

        db = try await open(dir)
        #expect(db.zones == [own, work, groceries])
        #expect(try db.fetch("Note").count == 3)
        #expect(db.zone(of: b) == work)
        try await db.close()
    }

    @Test("another zone made the default takes the inserts that name none, survives a reopen, and lets the old default be removed; a zone the database does not hold cannot be the default")
    func changingTheDefaultZone() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(work)
        await #expect { try await db.removeZone(own, reason: .removedByApp) } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        await #expect { try await db.setDefaultZone(ZoneReference("nope")) } throws: { ($0 as? StoreError)?.code == .unknownZone }
        try await db.setDefaultZone(work)
        let id = try await db.transaction { tx in try tx.insert("Note", ["title": "to work"]) }
        #expect(db.zone(of: id) == work)
        try await db.close()
        db = try await open(dir)
        #expect(db.defaultZone == work)
        try await db.removeZone(own, reason: .removedByApp)
        #expect(db.zones == [work])
        try await db.close()
    }

    @Test("a reference may point into another zone, and reads as absent once that zone has left the database")
    func crossZoneReferences() async throws {
        let dir = StoreDirectory()
        let db = try await open(dir)
        try await db.addZone(groceries)
        let (folder, note) = try await db.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "Shopping"], in: groceries)
            let note = try tx.insert("Note", ["title": "list", "folder": .reference(folder)])
            return (folder, note)
        }
        #expect(db.object(note)?["folder"] == .reference(folder))
        #expect(try db.read { $0.related(note, "folder").map(\.id) } == [folder])
        // A one-to-one kept on its target cannot cross: a person's passport is stored on the passport.
        let passport = try await db.transaction { try $0.insert("Passport", ["number": "X"]) }
        await #expect { try await db.transaction { tx in try tx.insert("Person", ["name": "Ann", "passport": .reference(passport)], in: groceries) } } throws: { error in
            (error as? StoreError)?.code == .invalidReference
        }
        // The side that is stored may point across.
        let person = try await db.transaction { try $0.insert("Person", ["name": "Bo"], in: groceries) }
        try await db.transaction { tx in try tx.update(passport, ["owner": .reference(person)]) }
        #expect(db.object(person)?["passport"] == .reference(passport), "read from the other side, across zones")
        try await db.removeZone(groceries, reason: .revoked)
        #expect(db.object(folder) == nil)
        #expect(try db.read { $0.related(note, "folder") }.isEmpty, "the target's zone is gone: the reference reads as absent")
        #expect(db.object(note)?["title"] == "list", "the other zones are untouched")
        try await db.close()
    }

    @Test("a move is one transaction: the object leaves its zone (members and references kept) and is in the other, across reopens, and can move back")
    func moveBetweenZones() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(work)
        let (note, tag) = try await db.transaction { tx in
            let tag = try tx.insert("Tag", ["label": "urgent"])
            let note = try tx.insert("Note", ["title": "plan", "rank": 7])
            try tx.add(note, "tags", tag)
            return (note, tag)
        }
        try await db.move(note, to: work)
        #expect(db.zone(of: note) == work)
        let moved = try #require(db.object(note))
        #expect(moved["title"] == "plan" && moved["rank"] == 7)
        #expect(moved.toMany["tags"] == [tag], "its members stay, pointing back into the old zone")
        #expect(db.store(for: own)?.object(note) == nil)
        #expect(try db.fetch("Note").count == 1, "one object, not two copies")
        try await db.transaction { tx in try tx.update(note, ["title": "plan v2"]) }
        #expect(db.store(for: work)?.object(note)?["title"] == "plan v2", "edits after the move go to its new zone")
        try await db.close()

        db = try await open(dir)
        #expect(db.zone(of: note) == work)
        try await db.move(note, to: own)
        #expect(db.zone(of: note) == own)
        #expect(db.object(note)?["title"] == "plan v2")
        #expect(db.store(for: work)?.object(note) == nil)
        try await db.close()
    }

    @Test("when two zones both show an object, the copy with the newest insert is the object, in every read")
    func duplicateCopiesResolveToTheNewestInsert() async throws {
        let clock = ManualClock()
        let dir = StoreDirectory()
        let db = try await Database.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        try await db.addZone(work)
        let id = ObjectID()
        // As two devices moving one object to two zones at once would leave it.
        try await #require(db.store(for: own)).transaction { try $0.insert("Note", id: id, ["title": "older"]) }
        clock.advance(10)
        try await #require(db.store(for: work)).transaction { try $0.insert("Note", id: id, ["title": "newer"]) }
        #expect(db.zone(of: id) == work)
        #expect(db.object(id)?["title"] == "newer")
        #expect(try db.fetch("Note").map { $0["title"] } == ["newer"])
        #expect(try db.fetch("Note", where: { $0["title"] == "older" }).isEmpty, "the losing copy is not the object, even when only it matches")
        await #expect { try await db.transaction { tx in try tx.insert("Note", id: id, [:]) } } throws: { ($0 as? StoreError)?.code == .objectExists }
        try await db.close()
    }

    @Test("another user cannot take over an own object by inserting its ID, newer, into a zone shared with the user: reads and writes stay in the own zone")
    func ownCopyWinsOverAnotherUsersCopy() async throws {
        let clock = ManualClock()
        let dir = StoreDirectory()
        let db = try await Database.open(at: dir.path, schema: notesSchema, options: storeOptions(clock: clock))
        try await db.addZone(groceries)
        let id = try await db.transaction { try $0.insert("Note", ["title": "mine"]) }
        clock.advance(1000)
        // What a pull of the other user's zone would bring: a newer insert of the same ID.
        try await #require(db.store(for: groceries)).transaction { try $0.insert("Note", id: id, ["title": "hijack"]) }
        #expect(db.zone(of: id) == own)
        #expect(db.object(id)?["title"] == "mine")
        #expect(try db.fetch("Note").map { $0["title"] } == ["mine"])
        try await db.transaction { tx in try tx.update(id, ["title": "still mine"]) }
        #expect(db.store(for: own)?.object(id)?["title"] == "still mine", "the write went to the own zone")
        #expect(db.store(for: groceries)?.object(id)?["title"] == "hijack")
        try await db.close()
    }

    @Test("a multi-zone commit a crash interrupted after its first part is completed when the database opens again")
    func interruptedCommitCompletes() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(work)
        let note = try await db.transaction { try $0.insert("Note", ["title": "moving"]) }
        db.state.withLock { $0.interruptCommitAfterParts = 1 }
        await #expect(throws: StoreError.self) { try await db.move(note, to: work) }
        #expect(try CommitJournal.all(in: dir.path).count == 1)
        try await db.close()

        db = try await open(dir)
        #expect(try CommitJournal.all(in: dir.path).isEmpty)
        #expect(db.zone(of: note) == work, "the part that never reached its log was applied from the journal")
        #expect(db.store(for: own)?.object(note) == nil)
        #expect(try db.fetch("Note").count == 1)
        // Applied as this store's own transaction: its sequences go on from it.
        try await db.transaction { tx in try tx.update(note, ["title": "moved"]) }
        #expect(db.object(note)?["title"] == "moved")
        try await db.close()
        db = try await open(dir)
        #expect(db.object(note)?["title"] == "moved")
        try await db.close()
    }

    @Test("removing a zone calls the hook first, reports the unpushed edits, keeps its store aside, and leaves the other zones as they were")
    func losingAZone() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(groceries)
        let kept = try await db.transaction { try $0.insert("Note", ["title": "mine"]) }
        let milk = try await db.transaction { try $0.insert("Note", ["title": "milk"], in: groceries) }
        try await db.transaction { try $0.update(milk, ["rank": 2]) }
        let copied = Mutex<[String]>([])
        db.whenRemovingZone { zone, store in
            copied.withLock { $0 = store.fetch("Note").compactMap { if case .string(let s) = $0["title"] { s } else { nil } } }
        }
        let changes = db.changes()
        let lost = try await db.removeZone(groceries, reason: .revoked)
        #expect(copied.withLock { $0 } == ["milk"], "the hook read the zone before it left")
        #expect(lost.reason == .revoked && lost.zone == groceries)
        #expect(lost.unpushedEdits == 2, "two local transactions no server acknowledged")
        #expect(db.zones == [own])
        #expect(db.object(milk) == nil && db.object(kept)?["title"] == "mine")
        var reported: LostZone?
        for await change in changes {
            if case .zoneRemoved(let zone) = change.kind { reported = zone; break }
        }
        #expect(reported == lost)
        // The kept store still holds the edits, readable as a store.
        let keptStore = try Store.open(at: db.path(of: lost))
        #expect(keptStore.object(milk)?["rank"] == 2)
        try await keptStore.close()
        try await db.close()

        db = try await open(dir)
        #expect(db.zones == [own] && db.lostZones == [lost])
        try await db.discardLostZone(lost)
        #expect(db.lostZones.isEmpty && !FileManager.default.fileExists(atPath: dir.sub(lost.directory)))
        await #expect { try await db.removeZone(own, reason: .removedByApp) } throws: { ($0 as? StoreError)?.code == .invalidArgument }
        try await db.close()
    }

    @Test("a whenRemovingZone hook may add a zone, copy the objects into it and make it the default (it ran inside the membership lock and waited for itself); the zone being removed can neither become the default nor be removed again meanwhile", .timeLimit(.minutes(3)))
    func hookKeepsACopyInANewZone() async throws {
        let dir = StoreDirectory()
        let db = try await open(dir)
        try await db.addZone(groceries)
        let archive = ZoneReference("archive")
        _ = try await db.transaction { try $0.insert("Note", ["title": "milk"], in: groceries) }
        let refusals = Mutex<[StoreError.Code]>([])
        db.whenRemovingZone { zone, store in
            do {
                try await db.addZone(archive)
                let titles = store.fetch("Note").compactMap { $0["title"] }
                try await db.transaction { tx in
                    for title in titles { _ = try tx.insert("Note", ["title": title], in: archive) }
                }
                try await db.setDefaultZone(archive)
            } catch {
                Issue.record("the hook could not keep its copy: \(error)")
            }
            for attempt in [{ try await db.setDefaultZone(zone) }, { _ = try await db.removeZone(zone, reason: .removedByApp) }] {
                do { try await attempt() } catch let error as StoreError {
                    refusals.withLock { $0.append(error.code) }
                } catch { Issue.record("unexpected \(error)") }
            }
        }
        let lost = try await db.removeZone(groceries, reason: .revoked)
        #expect(lost.zone == groceries)
        #expect(refusals.withLock { $0 } == [.invalidArgument, .invalidArgument])
        #expect(Set(db.zones) == [own, archive])
        #expect(try db.fetch("Note", in: [archive]).compactMap { $0["title"] } == [.string("milk")])
        let inserted = try await db.transaction { try $0.insert("Note", ["title": "new"]) }
        #expect(db.zone(of: inserted) == archive, "the hook made archive the default zone")
        try await db.close()
        let reopened = try await open(dir)
        #expect(Set(reopened.zones) == [own, archive] && reopened.lostZones == [lost])
        try await reopened.close()
    }

    @Test("a crash between recording a lost zone and moving its store is finished on open, never reopening the zone")
    func settingAsideIsFinishedOnOpen() async throws {
        let dir = StoreDirectory()
        var db = try await open(dir)
        try await db.addZone(work)
        let note = try await db.transaction { try $0.insert("Note", ["title": "w"], in: work) }
        try await db.close()
        // The manifest says lost, the store has not moved yet.
        var manifest = try #require(try DatabaseManifest.read(in: dir.path))
        manifest.zones.removeAll { $0.zone == work }
        let lost = LostZone(zone: work, directory: "lost/1-work", reason: .deleted, at: 1, unpushedEdits: 1)
        manifest.lost = [lost]
        try manifest.write(in: dir.path)
        db = try await open(dir)
        #expect(db.zones == [own])
        #expect(!FileManager.default.fileExists(atPath: dir.sub(work.relativeDirectory)))
        let keptStore = try Store.open(at: db.path(of: lost))
        #expect(keptStore.object(note)?["title"] == "w")
        try await keptStore.close()
        try await db.close()
    }

    @Test("a damaged or tampered database.json is refused with corruptDatabase naming the file, and nothing is changed")
    func tamperedManifestIsRefused() async throws {
        let dir = StoreDirectory()
        let db = try await open(dir)
        try await db.close()
        let path = DatabaseManifest.path(in: dir.path)
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        let cases: [String] = [
            "{",
            #"{"format": 2, "defaultZone": {"name": "default"}, "zones": [], "lost": []}"#,
            #"{"format": 1, "defaultZone": {"name": "default"}, "zones": [{"zone": {"name": "default"}, "directory": "../../etc"}], "lost": []}"#,
            #"{"format": 1, "defaultZone": {"name": "default"}, "zones": [{"zone": {"name": ".."}, "directory": "zones/own/.."}], "lost": []}"#,
            #"{"format": 1, "defaultZone": {"name": "default"}, "zones": [], "lost": [{"zone": {"name": "x"}, "directory": "../x", "reason": "revoked", "at": 1, "unpushedEdits": 0}]}"#,
            #"{"format": 1, "defaultZone": {"name": "default"}, "zones": [], "lost": [{"zone": {"name": "x"}, "directory": "lost/.", "reason": "revoked", "at": 1, "unpushedEdits": 0}]}"#,
            #"{"format": 1, "defaultZone": {"name": "default"}, "zones": [], "lost": [{"zone": {"name": "../../x"}, "directory": "lost/1-x", "reason": "revoked", "at": 1, "unpushedEdits": 0}]}"#,
        ]
        for text in cases {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            await #expect(performing: { _ = try await open(dir) }, throws: { error in
                guard let error = error as? StoreError else { return false }
                return error.code == .corruptDatabase && error.message.contains("database.json")
            })
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(text.utf8), "the file is left as it was")
        }
        try good.write(to: URL(fileURLWithPath: path))
        let reopened = try await open(dir)
        #expect(reopened.zones == [own])
        try await reopened.close()
    }

    @Test("an observed query spans zones, and follows commits in any zone and a zone leaving")
    func observedQueryAcrossZones() async throws {
        let dir = StoreDirectory()
        let db = try await open(dir)
        try await db.addZone(groceries)
        let stream = db.observe("Note", sortedBy: [SortKey("title")])
        var results = stream.makeAsyncIterator()
        #expect(await results.next()?.isEmpty == true)
        try await db.transaction { tx in try tx.insert("Note", ["title": "b"]) }
        #expect(await results.next()?.map { $0["title"] } == ["b"])
        try await db.transaction { tx in try tx.insert("Note", ["title": "a"], in: groceries) }
        #expect(await results.next()?.map { $0["title"] } == ["a", "b"])
        try await db.removeZone(groceries, reason: .deleted)
        #expect(await results.next()?.map { $0["title"] } == ["b"])
        try await db.close()
    }
}
