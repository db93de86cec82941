import Foundation
@testable import Strata
import StrataLog

/// A fresh directory on the real file system, removed when the value goes away.
final class StoreDirectory: Sendable {
    let path: String

    init(_ label: String = #function) {
        let safe = label.filter { $0.isLetter || $0.isNumber }.prefix(40)
        path = FileManager.default.temporaryDirectory.path + "/strata-store-tests/\(safe)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func sub(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Folders hold notes (cascade); notes have tags (many-to-many); people have one passport
/// (one-to-one); projects deny deletion while they have tasks.
let notesSchema = Schema {
    Entity("Folder", attributes: [Attribute("name", .string, optional: false)],
           relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "folder", deleteRule: .cascade)])
    Entity("Note", attributes: [
        Attribute("title", .string, default: ""),
        Attribute("body", .string),
        Attribute("pinned", .bool, default: false),
        Attribute("rank", .integer),
        Attribute("score", .double),
        Attribute("due", .date),
        Attribute("blob", .bytes),
        Attribute("ref", .uuid),
        Attribute("draft", .string, localOnly: true),
    ], relationships: [
        Relationship("folder", to: "Folder", inverse: "notes"),
        Relationship("tags", to: "Tag", toMany: true, inverse: "notes"),
    ])
    Entity("Tag", attributes: [Attribute("label", .string, optional: false)],
           relationships: [Relationship("notes", to: "Note", toMany: true, inverse: "tags")])
    Entity("Person", attributes: [Attribute("name", .string, default: "")],
           relationships: [Relationship("passport", to: "Passport", inverse: "owner", deleteRule: .cascade)])
    Entity("Passport", attributes: [Attribute("number", .string, default: "")],
           relationships: [Relationship("owner", to: "Person", inverse: "passport")])
    Entity("Project", attributes: [Attribute("name", .string, default: "")],
           relationships: [Relationship("tasks", to: "Task", toMany: true, inverse: "project", deleteRule: .deny)])
    Entity("Task", attributes: [Attribute("name", .string, default: "")],
           relationships: [Relationship("project", to: "Project", inverse: "tasks")])
}

/// A clock that only moves when told to, so that tests can make timestamps collide or order
/// them at will.
final class ManualClock: Sendable {
    let milliseconds = Atomic<UInt64>(1_700_000_000_000)
    func advance(_ by: UInt64 = 1) { milliseconds.add(by, ordering: .relaxed) }
    var read: @Sendable () -> UInt64 { { [self] in milliseconds.load(ordering: .relaxed) } }
}

func storeOptions(_ durability: Durability = .buffered, clock: ManualClock? = nil) -> StoreOptions {
    var options = StoreOptions(durability: durability)
    if let clock { options.clock = clock.read }
    return options
}

/// Small deterministic generator (xorshift64*) for seeded tests.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed | 1 }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}

import Synchronization
