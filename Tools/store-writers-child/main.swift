// A child of the multi-process store test (Tests/StrataTests/SharedStoreProcessTests.swift):
// opens a store that other processes share (`StoreSharing.processes`), commits batches of notes
// from several tasks, and watches every commit through `changes()`, until it is killed or told
// to stop. Its lines (each one write(2), so none is torn):
//
//     ready
//     ack <batch> <count>               a commit acknowledged (durable)
//     stopped                           after "stop" on stdin: no commit in flight any more
//     digest <hex> <notes> <observed>   after "digest" on stdin: the state it follows now, and
//                                       whether its observers saw every note ("ok", or what
//                                       they missed or saw twice)
//     error <message>
//
// Arguments: STORE PREFIX [SEGMENT_SIZE [COMPACT_AFTER_EVENTS]].
//
// Every note of batch B of N notes has title "b<B>n<N>": the parent checks each batch is wholly
// present or wholly absent, and present whenever it was acknowledged.
import Strata
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

func emit(_ line: String) {
    _ = line.withCString { write(1, $0, strlen($0)) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let prefix = Int(arguments[2]) else {
    emit("usage: store-writers-child STORE PREFIX\n")
    exit(2)
}
let schema = Schema {
    Entity("Note", attributes: [Attribute("title", .string, optional: false), Attribute("index", .integer)])
}

/// What the observers saw and whether to stop, shared by the tasks.
final class ChildState: Sendable {
    let observed = Mutex(Observed())
    let stopping = Atomic<Bool>(false)
}

/// What the observers saw: every inserted note's ID, and any seen twice or out of order.
struct Observed {
    var inserted: Set<ObjectID> = []
    var duplicates = 0
    var lastPosition: UInt64 = 0
    var disorder = 0
}

do {
    var options = StoreOptions(durability: .groupCommit)
    options.sharing = .processes
    // Small segments and compactions, so that rolls, snapshots and the "not alone" retirement
    // happen between the processes too.
    if arguments.count > 3, let size = Int(arguments[3]) { options.segmentSize = size }
    if arguments.count > 4, let events = Int(arguments[4]) { options.autoCompaction = AutoCompaction(eventsSinceSnapshot: events, bytesSinceSnapshot: nil) }
    let store = try await Store.open(at: arguments[1], schema: schema, options: options)
    let shared = ChildState()
    let changes = store.changes()
    // After subscribing: whatever lands from here on is either in this set or observed.
    let atOpen = Set(store.fetch("Note").map(\.id))
    let watching = Task.detached {
        for await set in changes {
            shared.observed.withLock { o in
                if set.positions.lowerBound < o.lastPosition { o.disorder += 1 }
                o.lastPosition = set.positions.upperBound
                for change in set.inserted where !o.inserted.insert(change.id).inserted { o.duplicates += 1 }
            }
        }
    }
    emit("ready\n")
    let writers = Task.detached {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<2 {
                group.addTask {
                    var n = 0
                    while !shared.stopping.load(ordering: .acquiring) {
                        let batch = prefix * 1_000_000 + writer * 10_000 + n
                        let count = 1 + n % 5
                        try await store.transaction { tx in
                            for i in 0..<count { try tx.insert("Note", ["title": .string("b\(batch)n\(count)"), "index": .integer(Int64(i))]) }
                        }
                        emit("ack \(batch) \(count)\n")
                        n += 1
                    }
                }
            }
            try await group.waitForAll()
        }
    }
    // readLine blocks the main thread: the writers and observers run detached from it.
    while let line = readLine() {
        switch line {
        case "stop":
            shared.stopping.store(true, ordering: .releasing)
            try await writers.value
            emit("stopped\n")
        case "digest":
            try await store.followOtherProcesses()
            // The observers get what was followed once everything before it is durable.
            var verdict = ""
            let now = Set(store.fetch("Note").map(\.id))
            for _ in 0..<500 {
                verdict = shared.observed.withLock { o in
                    let missing = now.subtracting(atOpen).subtracting(o.inserted).count
                    let phantom = o.inserted.subtracting(now).count
                    if missing == 0 && phantom == 0 && o.duplicates == 0 && o.disorder == 0 { return "ok" }
                    return "missing=\(missing),phantom=\(phantom),duplicates=\(o.duplicates),disorder=\(o.disorder)"
                }
                if verdict == "ok" { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            emit("digest \(store.digest()) \(now.count) \(verdict)\n")
        default:
            emit("error unknown command \(line)\n")
        }
    }
    watching.cancel()
} catch {
    emit("error \(error)\n")
    exit(1)
}
