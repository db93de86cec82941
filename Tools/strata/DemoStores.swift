import Foundation
import Strata

/// The second half of `strata demo`: two device stores edit offline (a conflict and a delete
/// among the edits), exchange their transactions, and converge to the same digest.
enum DemoStores {
    static let schema = Schema {
        Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
               relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
        Entity("Note", attributes: [Attribute("title", .string, default: ""), Attribute("pinned", .bool, default: false),
                                    Attribute("draft", .string, localOnly: true)],
               relationships: [Relationship("folder", to: "Folder", inverse: "notes")])
    }

    static func run(in directory: String) async throws {
        print("\n== Two devices, offline edits, convergence ==")
        let phone = try await Store.open(at: directory + "/phone", schema: schema, options: StoreOptions(durability: .groupCommit))
        let laptop = try await Store.open(at: directory + "/laptop", schema: schema, options: StoreOptions(durability: .groupCommit))
        func exchange() async throws {
            let fromPhone = try phone.transactions(forSync: true).map(\.transaction)
            let fromLaptop = try laptop.transactions(forSync: true).map(\.transaction)
            try await laptop.applyRemote(fromPhone)
            try await phone.applyRemote(fromLaptop)
        }
        let (folder, shopping, old) = try await phone.transaction { tx in
            let folder = try tx.insert("Folder", ["name": "Home"])
            let shopping = try tx.insert("Note", ["title": "Shopping", "folder": .reference(folder)])
            let old = try tx.insert("Note", ["title": "Old idea", "folder": .reference(folder)])
            return (folder, shopping, old)
        }
        try await exchange()
        print("phone created a folder with 2 notes; the laptop synced them")

        // Offline: both rename the same note (a conflict); the laptop deletes one, the phone pins it.
        try await phone.transaction { tx in
            try tx.update(shopping, ["title": "Shopping (phone)", "draft": "phone-only draft"])
            try tx.update(old, ["pinned": true])
        }
        try await Task.sleep(for: .milliseconds(5))
        try await laptop.transaction { tx in
            try tx.update(shopping, ["title": "Shopping (laptop)"])
            try tx.delete(old)
        }
        print("offline: both renamed \"Shopping\"; the laptop deleted \"Old idea\" while the phone pinned it")
        print("  before sync: phone \(phone.digest().prefix(12))…  laptop \(laptop.digest().prefix(12))…")
        try await exchange()
        print("  after sync:  phone \(phone.digest().prefix(12))…  laptop \(laptop.digest().prefix(12))…  \(phone.digest() == laptop.digest() ? "converged" : "DIVERGED")")
        for (name, store) in [("phone", phone), ("laptop", laptop)] {
            let titles = store.related(folder, "notes").map { "\($0["title"].stringValue ?? "")" }
            let blame = store.provenance(shopping)["title"].map { "set by \($0.event.replica.description.prefix(8))… #\($0.event.sequence)" } ?? ""
            print("  \(name): notes \(titles) (title \(blame)); \"Old idea\" \(store.object(old) == nil ? "deleted" : "exists"); draft \(store.object(shopping)?["draft"] ?? .null)")
        }
        let snapshot = try await phone.compact()
        print("phone compacted: snapshot at position \(snapshot.position)")
        try await phone.close()
        try await laptop.close()
        let reopened = try await Store.open(at: directory + "/phone", schema: schema)
        print("phone reopened from the snapshot (\(reopened.openReport.replayedEvents) events replayed after it): digest \(reopened.digest() == laptop.digest() ? "unchanged" : "CHANGED")")
        try await reopened.close()
    }
}
