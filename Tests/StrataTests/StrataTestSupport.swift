import Foundation
@testable import Strata
@_exported import StrataTestSupport
import StrataLog
@testable import StrataCore

typealias StoreDirectory = TemporaryDirectory

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

typealias SeededRandom = SeededGenerator

import Synchronization
