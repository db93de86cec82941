import ArgumentParser
import Foundation
import Logging
import Strata
import StrataServer
import StrataSync
import StrataCore

/// `strata demo`: the main job, with embedded defaults and no arguments. A log server starts
/// in-process on a free port; three devices make offline edits (a conflict, a delete against an
/// update); `diff` shows how two of them diverged; they sync to convergence; one attaches a
/// picture that another fetches on demand; the zone and a device are compacted; `inspect` shows
/// what a store holds. Everything is cleaned up at the end.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Three devices and a log server: offline edits, a conflict, a diff, convergence, an attached picture, compaction, inspection."
    )

    @Option(help: "Keep everything in this directory instead of a temporary one that is removed.")
    var keep: String?

    func run() async throws {
        let directory = keep ?? NSTemporaryDirectory() + "strata-demo-\(UUID().uuidString)"
        defer { if keep == nil { try? FileManager.default.removeItem(atPath: directory) } }
        do {
            try await Demo(directory: directory).run()
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError("the demo failed: \(error)")
        }
    }
}

struct Demo {
    let directory: String

    static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("pinned", .bool, default: false),
                                    Attribute("draft", .string, localOnly: true), Attribute("picture", .asset)],
               relationships: [Relationship("folder", to: "Folder", inverse: "notes"),
                               Relationship("tags", to: "Tag", toMany: true)])
        Entity("Tag", attributes: [Attribute("label", .string, optional: false)])
    }

    func section(_ title: String) { print("\n== \(title) ==") }

    func run() async throws {
        var logger = Logger(label: "strata.demo")
        logger.logLevel = .warning
        let storage = try EmbeddedZoneStorage(directory: directory + "/server", logger: logger)
        let secret = "demo-" + UUID().uuidString
        let users = try UserDirectory(tokens: ["alice": secret])
        // Quiet: cancelling the server at the end is the normal way out here, not an error.
        var serverLogger = logger
        serverLogger.logLevel = .critical
        let server = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(host: "127.0.0.1", port: 0), logger: serverLogger)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let serving = Task {
            try await server.run(onRunning: { port in portContinuation.yield(port) })
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CLIError("the demo server did not start") }
        guard let url = URL(string: "http://127.0.0.1:\(port)") else { throw CLIError("the demo server reported port \(port)") }
        print("Log server listening on \(url) (in this process), data in \(directory)/server")

        var devices: [(name: String, store: Store, engine: SyncEngine)] = []
        for name in ["phone", "laptop", "tablet"] {
            let store = try await Store.open(at: "\(directory)/\(name)", schema: Self.schema)
            devices.append((name, store, try SyncEngine(store: store, server: url, zone: "notes", credentials: secret)))
        }
        let (phone, laptop, tablet) = (devices[0], devices[1], devices[2])
        func show(_ device: (name: String, store: Store, engine: SyncEngine), _ note: ObjectID) -> String {
            guard let object = device.store.object(note) else { return "deleted" }
            return "\"\(object["title"].stringValue ?? "")\"\(object["pinned"] == .bool(true) ? " (pinned)" : "")"
        }

        section("1. The phone creates a folder with notes; every device syncs")
        let (folder, shopping, idea) = try await phone.store.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "Home"])
            let shopping = try tx.insert("Note", ["title": "Shopping", "folder": .reference(folder)])
            let idea = try tx.insert("Note", ["title": "Old idea", "folder": .reference(folder)])
            let tag = try tx.insert("Tag", ["label": "errand"])
            try tx.add(shopping, "tags", tag)
            return (folder, shopping, idea)
        }
        for device in devices {
            let report = try await device.engine.sync()
            print("  \(device.name): pushed \(report.pushedTransactions), pulled \(report.pulledTransactions) transaction(s); \(device.store.count("Note")) notes")
        }

        section("2. Offline edits")
        try await phone.store.transaction { tx in
            try tx.update(shopping, ["title": "Shopping: milk, eggs", "draft": "only on the phone"])
            try tx.update(idea, ["pinned": true])
        }
        try await Task.sleep(for: .milliseconds(5))
        try await laptop.store.transaction { tx in
            try tx.update(shopping, ["title": "Shopping: bread"])
            _ = try tx.insert("Note", ["title": "Call the plumber", "folder": .reference(folder)])
        }
        try await Task.sleep(for: .milliseconds(5))
        try await tablet.store.transaction { tx in try tx.delete(idea) }
        print("  phone:  renames \"Shopping\" and pins \"Old idea\"")
        print("  laptop: renames \"Shopping\" too (a conflict) and adds \"Call the plumber\"")
        print("  tablet: deletes \"Old idea\" (against the phone's pin)")
        for device in [phone, laptop] { try await device.engine.sync() }
        print("  the phone and the laptop sync; the tablet stays offline")

        section("3. strata diff phone tablet — before the tablet syncs")
        let diff = try StoreDiff.run(phone.store.directory, tablet.store.directory, limit: 20, progress: nil)
        print(diff.text.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

        section("4. Everyone syncs: convergence")
        for device in [tablet, phone, laptop] { try await device.engine.sync() }
        for device in devices {
            print("  \(device.name): Shopping = \(show(device, shopping)), Old idea: \(show(device, idea)), \(device.store.count("Note")) notes, digest \(device.store.digest().prefix(16))…")
        }
        let converged = Set(devices.map { $0.store.digest() }).count == 1
        print(converged ? "  converged: every device has the same digest" : "  DIVERGED")
        if let blame = phone.store.provenance(shopping)["title"] {
            let author = devices.first { $0.store.replicaID == blame.event.replica }?.name ?? "?"
            print("  the title conflict went to the newer edit: \(author)'s event \(Format.event(blame.event)) at \(Format.time(blame.hlc))")
        }
        print("  the delete won over the pin: an update never revives a deleted object")
        print("  the phone's draft stayed on the phone (a local-only attribute): \(phone.store.object(shopping)?["draft"] ?? .null) vs laptop \(laptop.store.object(shopping)?["draft"] ?? .null)")

        section("5. An attached picture, fetched on demand")
        let png = DemoPicture.png(side: 16)
        let picture = try await phone.store.importAsset(Data(png), mediaType: "image/png", fileName: "sketch.png")
        try await phone.store.transaction { tx in try tx.update(shopping, ["picture": .asset(picture)]) }
        try await phone.engine.sync()
        print("  phone:  attaches sketch.png (\(png.count) bytes, sha256 \(picture.sha256.hex.prefix(16))…) to \"Shopping\" and syncs: the bytes go up before the edit")
        try await laptop.engine.sync()
        guard let named = laptop.store.object(shopping)?["picture"].assetValue else { throw CLIError("the laptop's note names no picture after syncing") }
        print("  laptop: syncs; the note names \(named); held here: \(laptop.store.localFile(for: named) == nil ? "no (only the reference came)" : "yes")")
        let fetched = try Data(contentsOf: try await laptop.store.asset(named))
        let identical = fetched == Data(png)
        print("  laptop: fetches it on demand: \(fetched.count) bytes, \(identical ? "identical to the phone's" : "DIFFERENT from the phone's")")
        guard identical else { throw CLIError("the picture the laptop fetched differs from the phone's", exitCode: ExitStatus.finding) }

        section("6. Compaction")
        let zone = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
        print("  server: zone alice/notes snapshotted at position \(zone.position) (\(zone.payload.count) bytes)")
        let snapshot = try await phone.store.compact()
        print("  phone: snapshot \(snapshot.name) at position \(snapshot.position)")

        section("7. strata inspect phone")
        let inspection = try Inspection.run(try StoreFiles(phone.store.directory), objects: true, progress: nil)
        print(inspection.text.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))

        for device in devices { try await device.store.close() }
        serving.cancel()
        _ = await serving.result
        try await storage.close()
        guard converged else { throw CLIError("the devices did not converge", exitCode: ExitStatus.finding) }
        print("\nDone.")
    }
}

/// A small picture made in code (the demo reads no file): a `side`×`side` RGB gradient as a
/// valid PNG — its image data one stored (uncompressed) deflate block, so no zlib is needed.
enum DemoPicture {
    static func png(side: Int) -> [UInt8] {
        var raw: [UInt8] = []
        for y in 0..<side {
            raw.append(0)  // filter: none
            for x in 0..<side { raw += [UInt8(x * 255 / max(1, side - 1)), UInt8(y * 255 / max(1, side - 1)), 160] }
        }
        // zlib: header, one final stored block (length, its complement), the bytes, Adler-32.
        var zlib: [UInt8] = [0x78, 0x01, 0x01, UInt8(raw.count & 0xFF), UInt8(raw.count >> 8), UInt8(~raw.count & 0xFF), UInt8((~raw.count >> 8) & 0xFF)]
        zlib += raw
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in raw { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        zlib += bigEndian(b << 16 | a)
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        out += chunk("IHDR", bigEndian(UInt32(side)) + bigEndian(UInt32(side)) + [8, 2, 0, 0, 0])
        out += chunk("IDAT", zlib)
        out += chunk("IEND", [])
        return out
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }

    /// The CRC-32 PNG chunks carry (the zlib polynomial, not the log's CRC-32C).
    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
