import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@_spi(StrataInternals) import Strata
import StrataProtocol
@testable import StrataCore
import StrataServer
import StrataSync
import Synchronization
import StrataTestSupport
import Testing

/// Download masks through a real server: what a zone's mask leaves out never reaches the device,
/// from a snapshot or from pulls, on both backends; changing the mask downloads the zone again.
@Suite("Download masks through a real server", .serialized)
struct DownloadMaskSyncTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("body", .string)],
               relationships: [Relationship("comments", to: "Comment", toMany: true, inverse: "note")])
        Entity("Comment", attributes: [Attribute("text", .string, default: "")],
               relationships: [Relationship("note", to: "Note", inverse: "comments")])
    }

    func open(_ path: String) async throws -> Database {
        try await Database.open(at: path, schema: Self.schema, options: StoreOptions(durability: .buffered))
    }

    func strings(_ db: Database, _ entity: String, _ attribute: String) throws -> [String] {
        try db.fetch(entity).compactMap { if case .string(let s) = $0[attribute] { s } else { nil } }.sorted()
    }

    /// Every file under `directory` (logs, snapshots, cursors), read raw.
    func files(under directory: String) -> [(String, Data)] {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
        return walker.compactMap { $0 as? String }.compactMap { path in
            FileManager.default.contents(atPath: directory + "/" + path).map { (path, $0) }
        }
    }

    @Test("a device whose mask leaves out Comment and Note.body never receives them — from the zone's snapshot nor from pulls — edits what it has without clobbering what it lacks, gets its own comment back whole, and downloads everything once the mask is lifted (its unpushed edit pushed first)", .timeLimit(.minutes(5)), arguments: ServerBackend.allCases)
    func maskedDevice(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, storage in
            let full = try await open(dir.sub("full"))
            let fullSync = DatabaseSyncEngine(database: full, server: url, credentials: "alice-secret")
            var secrets: [String] = []
            func secret() -> String {
                let s = "secret-\(UUID().uuidString)"
                secrets.append(s)
                return s
            }
            let bodies = (0..<3).map { _ in secret() }
            let comments = (0..<2).map { _ in secret() }
            let notes = try await full.transaction { tx in
                let notes = try (0..<3).map { try tx.insert("Note", ["title": .string("n\($0)"), "body": .string(bodies[$0])]) }
                for text in comments { _ = try tx.insert("Comment", ["text": .string(text), "note": .reference(notes[0])]) }
                return notes
            }
            #expect(try await fullSync.sync().failures.isEmpty)
            // The server compacts: a new device starts from the zone's snapshot.
            _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "default"), retaining: 0)
            let later = (secret(), secret(), secret())
            try await full.transaction { tx in
                _ = try tx.insert("Note", ["title": "n3", "body": .string(later.0)])
                _ = try tx.insert("Comment", ["text": .string(later.1), "note": .reference(notes[1])])
                try tx.update(notes[0], ["body": .string(later.2)])       // only a masked attribute: withheld
                try tx.update(notes[1], ["title": "n1 renamed"])
            }
            #expect(try await fullSync.sync().failures.isEmpty)

            let mask = Mutex(try DownloadMask(entities: ["Comment"], attributes: ["Note": ["body"]]))
            let zone = ZoneReference("default")
            var options = DatabaseSyncOptions()
            options.downloadMask = { _ in mask.withLock { $0 } }
            let masked = try await open(dir.sub("masked"))
            let maskedSync = DatabaseSyncEngine(database: masked, server: url, credentials: "alice-secret", options: options)
            let first = try await maskedSync.sync()
            #expect(first.failures.isEmpty, "\(first.failures)")
            #expect(first.zones[zone]?.bootstraps == 1, "the device started from the zone's snapshot")
            let store0 = try #require(masked.store(for: zone))
            #expect(try strings(masked, "Note", "title") == ["n0", "n1 renamed", "n2", "n3"])
            #expect(try strings(masked, "Note", "body").isEmpty, "a masked attribute arrived")
            #expect(try masked.fetch("Comment").isEmpty, "a masked entity arrived")
            #expect(try masked.fetch("Note").allSatisfy { store0.related($0.id, "comments").isEmpty })
            // Nor in any file of the device: its log, its snapshots, its cursors.
            for (path, data) in files(under: dir.sub("masked")) {
                for s in secrets { #expect(data.range(of: Data(s.utf8)) == nil, "\(s) is in \(path)") }
            }
            for stored in try store0.transactions(forSync: true) {
                for event in stored.transaction.events {
                    if case .insert(let entity, _, let fields) = event.change { #expect(entity != "Comment" && fields["body"] == nil) }
                    if case .update(let entity, _, let fields) = event.change { #expect(entity != "Comment" && fields["body"] == nil) }
                }
            }

            // Moving a note elsewhere would write it anew from what the device holds (no body):
            // refused; a note of an unmasked zone moves.
            let elsewhere = ZoneReference("elsewhere")
            try await masked.addZone(elsewhere)
            do {
                try await masked.move(notes[0], to: elsewhere)
                Issue.record("a note was moved out of a zone downloaded without its body")
            } catch let error as StoreError {
                #expect(error.code == .invalidArgument && error.message.contains("Comment,Note.body"), "\(error)")
            }
            #expect(masked.zone(of: notes[0]) == zone)

            // The masked device edits a title and writes a comment of its own.
            try await masked.transaction { tx in
                try tx.update(notes[2], ["title": "n2 from the masked device"])
                _ = try tx.insert("Comment", ["text": "mine", "note": .reference(notes[2])])
            }
            #expect(try await maskedSync.sync().failures.isEmpty)
            #expect(try strings(masked, "Comment", "text") == ["mine"], "its own comment came back masked")
            #expect(try await fullSync.sync().failures.isEmpty)
            #expect(full.object(notes[2])?["title"] == "n2 from the masked device")
            #expect(full.object(notes[2])?["body"] == .string(bodies[2]), "the masked device's edit clobbered what it never had")
            #expect(try strings(full, "Comment", "text").contains("mine"))

            // The mask is lifted, with an edit not pushed yet: pushed, then everything downloaded.
            try await masked.transaction { tx in try tx.update(notes[1], ["title": "n1 before unmasking"]) }
            mask.withLock { $0 = .none }
            let changes = masked.changes()
            let lifted = try await maskedSync.sync()
            #expect(lifted.failures.isEmpty, "\(lifted.failures)")
            #expect(try strings(masked, "Note", "body").sorted() == [bodies[1], bodies[2], later.0, later.2].sorted())
            #expect(try strings(masked, "Comment", "text") == (comments + [later.1, "mine"]).sorted())
            #expect(masked.object(notes[1])?["title"] == "n1 before unmasking")
            var emptied = false
            for await change in changes {
                if case .zoneEmptied = change.kind { emptied = true; break }
            }
            #expect(emptied)
            // The store as it was is kept until the app discards it.
            let kept = try #require(masked.lostZones.first { $0.zone == zone })
            #expect(kept.reason == .redownloaded && kept.unpushedEdits == 0)
            try await masked.discardLostZone(kept)
            #expect(try await fullSync.sync().failures.isEmpty)
            #expect(full.object(notes[1])?["title"] == "n1 before unmasking", "the edit made before the mask was lifted was lost")
            #expect(masked.store(for: zone)?.digest() == full.store(for: zone)?.digest(), "the device downloaded again differs from the full one")
            await maskedSync.stop()
            await fullSync.stop()
            try await masked.close()
            try await full.close()
        }
    }

    @Test("the server refuses a malformed omit (400 badRequest, naming it) and a push holding a withheld placeholder; a store keeps its mask through a lost cursor, and one whose record is damaged takes no mask (downloadMaskChanged)", arguments: [ServerBackend.embedded])
    func refusals(backend: ServerBackend) async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server"), backend: backend) { url, _ in
            let store = try await Store.open(at: dir.sub("device"), schema: Self.schema, options: StoreOptions(durability: .buffered))
            var options = SyncOptions()
            options.downloadMask = try DownloadMask(entities: ["Comment"])
            let engine = try SyncEngine(store: store, server: url, zone: "notes", tokens: .fixed("alice-secret"), options: options)
            _ = try await store.transaction { tx in try tx.insert("Note", ["title": "x"]) }
            let report = try await engine.sync()
            #expect(report.pushedTransactions >= 1, "\(report)")
            var request = URLRequest(url: url.appendingPathComponent("v1/zones/notes/changes").appending(queryItems: [URLQueryItem(name: "omit", value: "a.b.c")]))
            request.setValue("Bearer alice-secret", forHTTPHeaderField: "Authorization")
            let (body, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 400)
            #expect(String(decoding: body, as: UTF8.self).contains("omit"))

            await engine.stop()
            // The store keeps the mask it downloaded with: a lost cursor does not make it take
            // another one.
            try FileManager.default.removeItem(atPath: dir.sub("device") + "/sync-notes.json")
            do {
                _ = try SyncEngine(store: store, server: url, zone: "notes", tokens: .fixed("alice-secret"))
                Issue.record("an engine without the store's mask was made after its cursor was lost")
            } catch let error as SyncError {
                #expect(error.code == .downloadMaskChanged && error.message.contains("Comment"), "\(error)")
            }
            try await store.close()
            // A damaged record: the mask is unknown, so no mask is taken for it.
            try Data("{".utf8).write(to: URL(fileURLWithPath: dir.sub("device") + "/download-masks.json"))
            let reopened = try await Store.open(at: dir.sub("device"), schema: Self.schema, options: StoreOptions(durability: .buffered))
            #expect(throws: StoreError.self) { _ = try reopened.downloadMask }
            for mask in [DownloadMask.none, try DownloadMask(entities: ["Comment"])] {
                var maskOptions = SyncOptions()
                maskOptions.downloadMask = mask
                do {
                    _ = try SyncEngine(store: reopened, server: url, zone: "notes", tokens: .fixed("alice-secret"), options: maskOptions)
                    Issue.record("an engine with mask \"\(mask)\" took a store whose record is damaged")
                } catch let error as SyncError {
                    #expect(error.code == .downloadMaskChanged && error.message.contains("damaged"), "\(error)")
                }
            }
            try await reopened.close()
            // A push holding a withheld placeholder is refused: it only goes from a server to a device.
            let replica = ReplicaID(rawValue: 7)
            let placeholder = EventCodec.encode(TransactionRecord(replica: replica, events: [
                Event(id: EventID(replica: replica, sequence: 1), hlc: HLC(rawValue: 1 << 20), change: .withheld),
            ]))
            do {
                _ = try PushValidation.validate([placeholder], now: 1 << 40, maxClockOffset: .seconds(300))
                Issue.record("a push holding a withheld event was taken")
            } catch let error as ServerError {
                #expect(error.code == .badRequest && error.message.contains("withheld"), "\(error)")
            }
            try await store.close()
        }
    }

    /// Answers every request with an empty pull page (or a snapshot), saying it applied `omitted`
    /// (or nothing, as an older server that ignores `omit`); keeps the URLs asked.
    final class ScriptedServer: HTTPExchange {
        let omitted: String?
        let urls = Mutex<[String]>([])
        init(omitted: String?) { self.omitted = omitted }

        func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
            urls.withLock { $0.append(request.url) }
            var headers = [StrataHeader.nextToken.lowercased(): "t1", StrataHeader.moreComing.lowercased(): "false",
                           StrataHeader.snapshotToken.lowercased(): "t1"]
            if let omitted { headers[StrataHeader.omitted.lowercased()] = omitted }
            return HTTPExchangeResponse(status: 200, headers: headers, body: TransactionFrames.encode([]))
        }
    }

    @Test("a masked pull or snapshot is refused when the answer does not say the server applied that mask (an older server ignores omit and would send everything); the request names the mask and the device's replica")
    func olderServerIsRefused() async throws {
        let mask = try DownloadMask(entities: ["Comment"], attributes: ["Note": ["body"]])
        let zone = ZoneReference("notes")
        let replica = ReplicaID(rawValue: 42)
        for omitted in [nil, "Comment"] {
            let server = ScriptedServer(omitted: omitted)
            let transport = HTTPSyncTransport(server: URL(string: "http://example")!, tokens: .fixed("t"), exchange: server)
            for call in [{ _ = try await transport.pull(zone: zone, after: nil, limit: 10, wait: nil, omitting: mask, replica: replica) },
                         { _ = try await transport.snapshot(zone: zone, omitting: mask) }] {
                let said = omitted ?? "nothing"
                do {
                    try await call()
                    Issue.record("an answer that says \(said) of the mask was taken")
                } catch let error as SyncError {
                    #expect(error.code == .malformedResponse && error.message.contains("Comment,Note.body"), "\(error)")
                }
            }
            let asked = try #require(server.urls.withLock { $0.first })
            #expect(asked.contains("omit=Comment,Note.body") && asked.contains("replica=\(replica)"), "\(asked)")
        }
        let honest = ScriptedServer(omitted: mask.description)
        let transport = HTTPSyncTransport(server: URL(string: "http://example")!, tokens: .fixed("t"), exchange: honest)
        #expect(try await transport.pull(zone: zone, after: nil, limit: 10, wait: nil, omitting: mask, replica: replica).nextToken == "t1")
        #expect(try await transport.snapshot(zone: zone, omitting: mask)?.token == "t1")
        // Without a mask nothing is asked of the answer (every server answers so).
        let plain = HTTPSyncTransport(server: URL(string: "http://example")!, tokens: .fixed("t"), exchange: ScriptedServer(omitted: nil))
        #expect(try await plain.pull(zone: zone, after: nil, limit: 10, wait: nil).nextToken == "t1")
    }
}
