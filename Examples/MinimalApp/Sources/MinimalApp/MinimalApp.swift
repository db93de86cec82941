// A minimal app: one model, one store, one sync engine on the default transport.
//
//     swift run MinimalApp STORE-DIRECTORY SERVER-URL TOKEN ZONE TITLE
//
// It writes a note titled TITLE, syncs with the zone, and prints every title the zone holds, one
// per line, sorted: two runs with two stores show each other's notes.
import Foundation
import Strata
import StrataSync

struct Note: StrataModel {
    static let entityName = "Note"
    static let entity: Entity? = Entity("Note", attributes: [Attribute("title", .string, default: "")])

    var id = ObjectID()
    var title: String
}

@main
struct MinimalApp {
    static func main() async {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.count == 5, let server = URL(string: arguments[arguments.startIndex + 1]) else {
            FileHandle.standardError.write(Data("usage: MinimalApp STORE SERVER-URL TOKEN ZONE TITLE\n".utf8))
            exit(64)
        }
        let values = Array(arguments)
        do {
            let store = try await Store.open(at: values[0], schema: try Schema(models: Note.self))
            try await store.transaction { tx in try tx.insert(Note(title: values[4])) }
            let engine = try SyncEngine(store: store, server: server, zone: values[3], tokens: .fixed(values[2]))
            let report = try await engine.sync()
            for title in try store.fetch(Note.self).map(\.title).sorted() { print(title) }
            // What an app keeps of a sync names the reported types too (this compiles only while
            // `import Strata` and `import StrataSync` expose them).
            let forks: [ReplicaFork] = report.forks
            for fork in forks { FileHandle.standardError.write(Data("MinimalApp: forked away from replica \(fork.replica) (\(fork.reason))\n".utf8)) }
            try await store.close()
        } catch let error as SyncError where error.code == ErrorCode.unauthorized {
            FileHandle.standardError.write(Data("MinimalApp: \(error) — check the token\n".utf8))
            exit(1)
        } catch {
            FileHandle.standardError.write(Data("MinimalApp: \(error)\n".utf8))
            exit(1)
        }
    }
}
