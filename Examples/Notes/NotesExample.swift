// The getting-started example (the article GettingStarted in Strata's documentation walks
// through it): a model with its entity declared next to it, two devices, an observed query, and
// sync through a log server. The server runs in this process so that the example runs on its own;
// an app syncs with a `strata serve` elsewhere.
//
//     swift run --traits Server strata-example-notes
//
// The tests run it (ExamplesTests) and check what it prints.
import Foundation
import Logging
import Strata
import StrataServer
import StrataSync

/// A note, stored as objects of the entity `Note`.
struct Note: StrataModel, Equatable {
    static let entityName = "Note"
    static let entity: Entity? = Entity("Note", attributes: [
        Attribute("title", .string, default: ""),
        Attribute("done", .bool, default: false),
    ])

    var id = ObjectID()
    var title: String
    var done = false
}

@main
struct NotesExample {
    static func main() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("strata-example-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // 1. A log server with one user, alice (an app is given a URL and a token instead).
        let token = "example-" + UUID().uuidString
        var quiet = Logger(label: "strata.example")
        quiet.logLevel = .critical
        let server = StrataServerApp(storage: try EmbeddedZoneStorage(directory: directory + "/server", logger: quiet),
                                     users: try UserDirectory(tokens: ["alice": token]),
                                     configuration: ServerConfiguration(host: "127.0.0.1", port: 0), logger: quiet)
        let (ports, announce) = AsyncStream.makeStream(of: Int.self)
        let serving = Task { try await server.run(onRunning: { announce.yield($0) }) }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next(), let url = URL(string: "http://127.0.0.1:\(port)") else {
            print("the log server did not start")
            exit(2)
        }

        // 2. Two devices of alice's: each a store of its own, synced with her zone "notes".
        let schema = try Schema(models: Note.self)
        let phone = try await Store.open(at: directory + "/phone", schema: schema)
        let laptop = try await Store.open(at: directory + "/laptop", schema: schema)
        let phoneSync = try SyncEngine(store: phone, server: url, zone: "notes", tokens: .fixed(token))
        let laptopSync = try SyncEngine(store: laptop, server: url, zone: "notes", tokens: .fixed(token))

        // 3. The laptop shows the notes still to do, sorted by title: an observed query delivers
        //    the current list, then a new one whenever a commit — local or synced — changes it.
        var toDo = laptop.observe(Note.self, where: { !$0.done }, sortedBy: [SortKey("title")]).makeAsyncIterator()
        print("laptop, to do: \(titles(try await toDo.next()))")

        // 4. The phone writes two notes offline, then syncs; the laptop syncs and sees them.
        try await phone.transaction { tx in
            try tx.insert(Note(title: "Buy milk"))
            try tx.insert(Note(title: "Call Ann"))
        }
        try await phoneSync.sync()
        try await laptopSync.sync()
        print("laptop, to do: \(titles(try await toDo.next()))")

        // 5. The laptop ticks one off (one field changes, so one field is written); the phone
        //    syncs it back.
        guard var milk = try laptop.fetch(Note.self, where: { $0.title == "Buy milk" }).first else {
            print("the synced note is missing")
            exit(1)
        }
        milk.done = true
        try await laptop.transaction { [milk] tx in try tx.update(milk) }
        print("laptop, to do: \(titles(try await toDo.next()))")
        try await laptopSync.sync()
        try await phoneSync.sync()
        let done = try phone.read { view in try view.fetch(Note.self, where: { $0.done }) }
        print("phone, done: \(done.map(\.title))")
        print("converged: \(phone.digest() == laptop.digest())")

        try await phone.close()
        try await laptop.close()
        serving.cancel()
        _ = await serving.result
    }

    static func titles(_ notes: [Note]?) -> [String] { notes?.map(\.title) ?? [] }
}
