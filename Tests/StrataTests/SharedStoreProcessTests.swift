import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
@testable import StrataCore
import StrataLog
import StrataTestSupport

/// Several processes committing to one store (`StoreSharing.processes`), killed with SIGKILL at
/// random moments (Tools/store-writers-child): no acknowledged commit is lost, every commit is
/// all or nothing, every surviving process's projection equals a fresh open, and each process's
/// observers saw every commit once, in log order. Rounds per process count:
/// `STRATA_SHARED_ROUNDS` (default 60, so 120 kills); seed: `STRATA_SHARED_SEED`.
@Suite("A store shared by writer processes", .serialized)
struct SharedStoreProcessTests {
    static let schema = Schema {
        Entity("Note", attributes: [Attribute("title", .string, optional: false), Attribute("index", .integer)])
    }

    static var sharedOptions: StoreOptions {
        var options = StoreOptions(durability: .groupCommit)
        options.sharing = .processes
        return options
    }

    @Test("Two and three processes committing, killed at random: nothing acknowledged lost, all agree", arguments: [2, 3])
    func killedWriters(processes: Int) async throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = Int(environment["STRATA_SHARED_ROUNDS"] ?? "") ?? 60
        let seed = UInt64(environment["STRATA_SHARED_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        var rng = SeededGenerator(seed: seed)
        let dir = TemporaryDirectory()
        let store = dir.sub("store")
        var spawned = 0
        func spawn() throws -> WriterChild {
            spawned += 1
            // 32 KiB segments and a compaction every 3,000 events: rolls, snapshots and (not
            // alone) unretired segments between the processes, under the kills.
            return try WriterChild(store: store, prefix: spawned, scratch: dir.sub("child\(spawned)"), extra: ["32768", "3000"])
        }
        var children = try (0..<processes).map { _ in try spawn() }
        var acknowledged: [String: Int] = [:]
        func collect(_ child: WriterChild) {
            for line in child.lines() {
                let fields = line.split(separator: " ")
                if fields.first == "error" { Issue.record("seed \(seed): child \(child.prefix) failed: \(line)") }
                if fields.count == 3, fields[0] == "ack", let count = Int(fields[2]) { acknowledged["b\(fields[1])n\(count)"] = count }
            }
        }
        for _ in 0..<rounds {
            try await Task.sleep(for: .milliseconds(Int.random(in: 20...150, using: &rng)))
            let victim = Int.random(in: 0..<children.count, using: &rng)
            children[victim].kill()
            collect(children[victim])
            children[victim] = try spawn()
        }
        // Quiesce the survivors, then compare what each follows with a fresh open.
        for child in children { try await child.waitFor("ready", seed: seed) }
        for child in children { child.send("stop") }
        for child in children { try await child.waitFor("stopped", seed: seed) }
        for child in children { child.send("digest") }
        var digests: [String] = []
        for child in children {
            let line = try await child.waitFor("digest", seed: seed)
            let fields = line.split(separator: " ")
            #expect(fields.count == 4 && fields[3] == "ok", "seed \(seed): child \(child.prefix)'s observers: \(line)")
            digests.append(fields.count > 1 ? String(fields[1]) : "")
        }
        let fresh = try await Store.open(at: store, schema: Self.schema, options: Self.sharedOptions)
        for (child, digest) in zip(children, digests) {
            #expect(digest == fresh.digest(), "seed \(seed): child \(child.prefix) follows a state other than a fresh open's")
        }
        try await fresh.close()
        for child in children {
            child.kill()
            collect(child)
        }
        // Alone now: an exclusive open, as the app's next launch after every extension quit.
        let reopened = try await Store.open(at: store, schema: Self.schema, options: StoreOptions(durability: .groupCommit))
        var counts: [String: Set<Int64>] = [:]
        for note in reopened.fetch("Note") {
            counts[note["title"].stringValue ?? "", default: []].insert(note["index"].integerValue ?? -1)
        }
        for (batch, indexes) in counts {
            let size = batch.split(separator: "n").last.flatMap { Int64($0) } ?? -1
            #expect(indexes == Set(0..<size), "seed \(seed): batch \(batch) is partial: \(indexes.sorted())")
        }
        var lost = 0
        for (batch, count) in acknowledged where counts[batch]?.count != count { lost += 1 }
        #expect(lost == 0, "seed \(seed): \(lost) acknowledged batches missing or partial")
        #expect(acknowledged.count > rounds, "seed \(seed): the children acknowledged too little to test anything")
        // Every process committed under the store's one replica, in one sequence without gaps.
        let applied = reopened.appliedSequences()
        #expect(applied.count == 1 && applied.first?.contiguous == applied.first?.highest, "seed \(seed): \(applied)")
        try await reopened.close()
    }

    @Test("An exclusive open and a shared one exclude each other, both ways")
    func exclusiveAndSharedExclude() async throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("store")
        let exclusive = try await Store.open(at: path, schema: Self.schema)
        let refused = try WriterChild(store: path, prefix: 1, scratch: dir.sub("refused"))
        let line = try await refused.waitFor("error", seed: 0)
        #expect(line.contains("open in another process"), "a shared open while the store is open exclusively: \(line)")
        refused.kill()
        try await exclusive.close()

        let child = try WriterChild(store: path, prefix: 2, scratch: dir.sub("sharing"))
        try await child.waitFor("ready", seed: 0)
        let error = await #expect(throws: StoreError.self) { _ = try await Store.open(at: path, schema: Self.schema) }
        #expect(error?.description.contains("open in another process") == true, "\(String(describing: error))")
        child.kill()
    }

    @Test("Observers in one process fire for another process's commits without being asked (the watcher), in log order")
    func watcherDeliversOtherProcessesCommits() async throws {
        let dir = TemporaryDirectory()
        let path = dir.sub("store")
        let store = try await Store.open(at: path, schema: Self.schema, options: Self.sharedOptions)
        let changes = store.changes()
        let child = try WriterChild(store: path, prefix: 3, scratch: dir.sub("writer"))
        var seen = 0
        var last: UInt64 = 0
        let deadline = ContinuousClock.now + .seconds(60)
        for await set in changes {
            #expect(set.origin == .otherProcess)
            #expect(set.positions.lowerBound >= last, "out of order: \(set.positions) after \(last)")
            last = set.positions.upperBound
            seen += set.inserted.count
            if seen >= 200 || ContinuousClock.now > deadline { break }
        }
        child.kill()
        #expect(seen >= 200, "the watcher delivered \(seen) notes of the other process's commits")
        // Everything the observer saw is what a follow finds: the watcher left nothing behind.
        try await store.followOtherProcesses()
        #expect(store.count("Note") >= seen)
        try await store.close()
    }

    @Test("A fork and an adopted snapshot need the store to themselves; a database is not shared yet")
    func forkNeedsExclusiveAccess() async throws {
        let dir = TemporaryDirectory()
        let store = try await Store.open(at: dir.sub("store"), schema: Self.schema, options: Self.sharedOptions)
        try await store.transaction { try $0.insert("Note", ["title": "a"]) }
        let error = await #expect(throws: StoreError.self) { _ = try await store.fork(keepingThrough: 0) }
        #expect(error?.code == .exclusiveAccessRequired)
        let adoption = await #expect(throws: StoreError.self) { _ = try await store.adoptSnapshot(try store.statePayload()) }
        #expect(adoption?.code == .exclusiveAccessRequired)
        // A database's zone list and multi-zone journal are one process's: refused, not half-shared.
        let database = await #expect(throws: StoreError.self) {
            _ = try await Database.open(at: dir.sub("database"), schema: Self.schema, options: Self.sharedOptions)
        }
        #expect(database?.code == .invalidArgument)
        // Alone, a shared store still compacts fully (its segments retire).
        let info = try await store.compact()
        #expect(info.position == store.segmentLog.nextPosition)
        try await store.close()
    }
}

/// One `store-writers-child`, its output in a file (read whole at any time), commands on stdin.
final class WriterChild: @unchecked Sendable {
    let prefix: Int
    private let process = SpawnedProcess()
    private let input = Pipe()
    private let output: String

    init(store: String, prefix: Int, scratch: String, extra: [String] = []) throws {
        self.prefix = prefix
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        output = scratch + "/out"
        FileManager.default.createFile(atPath: output, contents: nil)
        process.executableURL = try ChildProcess.executable("store-writers-child")
        process.arguments = [store, String(prefix)] + extra
        process.standardInput = input
        process.standardOutput = FileHandle(forWritingAtPath: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// The complete lines written so far.
    func lines() -> [Substring] {
        let text = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
        return Array(text.split(separator: "\n", omittingEmptySubsequences: false).dropLast())
    }

    /// Writes a command line to the child's standard input. The throwing write: a child that
    /// died leaves a broken pipe, which the older `write(_:)` turns into a crash of the test
    /// process (the test then fails on the child's missing answer instead).
    func send(_ command: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
    }

    /// The first line starting with `word`, waited for up to 60 s.
    @discardableResult
    func waitFor(_ word: String, seed: UInt64) async throws -> String {
        for _ in 0..<6000 {
            if let line = lines().first(where: { $0.hasPrefix(word) }) { return String(line) }
            if let failure = lines().first(where: { $0.hasPrefix("error") }), word != "error" {
                throw ChildFailure(description: "seed \(seed): child \(prefix): \(failure)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw ChildFailure(description: "seed \(seed): child \(prefix) wrote no \"\(word)\" line within 60 s; it wrote \(lines().suffix(3))")
    }

    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    struct ChildFailure: Error, CustomStringConvertible {
        var description: String
    }
}
