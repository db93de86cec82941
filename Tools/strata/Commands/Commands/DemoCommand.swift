import ArgumentParser
import Foundation
import Logging
import Strata
import StrataServer
import StrataSync
import StrataCore

/// `strata demo`: the main job, with embedded defaults and no arguments. A log server starts
/// in-process on a free port; three devices make offline edits (a conflict, a delete against an
/// update); `diff` shows how two of them diverged; they sync to convergence; the zone and a device
/// are compacted; `inspect` shows what a store holds. Everything is cleaned up at the end.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Three devices and a log server: offline edits, a conflict, a diff, convergence, compaction, inspection."
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
                                    Attribute("draft", .string, localOnly: true)],
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

        section("5. Compaction")
        let zone = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
        print("  server: zone alice/notes snapshotted at position \(zone.position) (\(zone.payload.count) bytes)")
        let snapshot = try await phone.store.compact()
        print("  phone: snapshot \(snapshot.name) at position \(snapshot.position)")

        section("6. strata inspect phone")
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
