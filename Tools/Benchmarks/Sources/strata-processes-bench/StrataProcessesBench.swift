// strata-processes-bench: a store shared by writer processes (issue 26's goals: two writer processes
// commit at ≥ 0.7× the rate of one, and a commit in one process reaches an observer in another
// within 10 ms at p99).
//
//   swift run -c release --package-path Tools/Benchmarks strata-processes-bench [--quick]
//
// The harness runs itself as its child processes (`--child …`), so every process is the same
// release build. Throughput: 16 one-note committers (group commit), in one process or split 8 + 8
// over two, each configuration on a fresh store, alternated over several rounds; the medians'
// ratio is the result. The exclusive store (no cross-process lock) with 16 committers in one
// process is measured in the same rounds, to show what sharing costs a single process.
// Latency: one process commits a note every 2 ms whose title is the CLOCK_MONOTONIC time of its
// commit (the same clock in every process on Linux); another observes the store (`changes()`, and
// an observed query) and takes the time each insert reaches it.
import BenchSupport
import Foundation
import Strata
import StrataCore
import Synchronization

let schema = Schema { Entity("Note", attributes: [Attribute("title", .string), Attribute("index", .integer)]) }

func options(shared: Bool) -> StoreOptions {
    var options = StoreOptions(durability: .groupCommit)
    options.sharing = shared ? .processes : .exclusive
    options.autoCompaction = .disabled
    return options
}

/// This executable, to run as a child.
func selfPath() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

/// Starts this executable as a child with `arguments`; its standard output is returned by `finish`.
final class Child: @unchecked Sendable {
    let process = Process()
    let output = Pipe()
    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: selfPath())
        process.arguments = ["--child"] + arguments
        process.standardOutput = output
        try process.run()
    }
    func finish() -> String {
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

// MARK: Children

/// `commit STORE SHARED TASKS START_NANOS SECONDS`: commits one-note transactions from TASKS
/// tasks between START and START + SECONDS; prints the number committed.
func childCommit(_ a: [String]) async throws {
    let store = try await Store.open(at: a[0], schema: schema, options: options(shared: a[1] == "1"))
    let tasks = Int(a[2])!, start = UInt64(a[3])!, duration = UInt64(Double(a[4])! * 1e9)
    while monotonicNanos() < start { usleep(200) }
    let sample = try await timedTasks(tasks, until: start + duration) { task, i in
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string("t\(task)i\(i)"), "index": .integer(Int64(i))]) }
    }
    try await store.close()
    print(sample.operations)
}

/// `emit STORE COUNT`: commits COUNT notes, one every 2 ms, each titled with its commit time.
func childEmit(_ a: [String]) async throws {
    let store = try await Store.open(at: a[0], schema: schema, options: options(shared: true))
    for i in 0..<Int(a[1])! {
        try await store.transaction { tx in _ = try tx.insert("Note", ["title": .string(String(monotonicNanos())), "index": .integer(Int64(i))]) }
        try await Task.sleep(for: .milliseconds(2))
    }
    try await store.close()
}

/// `observe STORE COUNT`: prints "ready", then the latency (ns) of each of COUNT inserts from
/// another process, as `changes()` delivered them and as an observed query of the notes did.
func childObserve(_ a: [String]) async throws {
    let store = try await Store.open(at: a[0], schema: schema, options: options(shared: true))
    let count = Int(a[1])!
    let changes = store.changes()
    let query = store.observe("Note")
    let queryLatencies = Task.detached { () -> [UInt64] in
        var seen = Set<ObjectID>(), latencies: [UInt64] = []
        for await notes in query {
            let now = monotonicNanos()
            for note in notes where seen.insert(note.id).inserted {
                if let sent = note["title"].stringValue.flatMap(UInt64.init), sent <= now { latencies.append(now - sent) }
            }
            if seen.count >= count { break }
        }
        return latencies
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    var latencies: [UInt64] = []
    for await set in changes where set.origin == .otherProcess {
        let now = monotonicNanos()
        for change in set.inserted {
            if let sent = store.object(change.id)?["title"].stringValue.flatMap(UInt64.init), sent <= now { latencies.append(now - sent) }
        }
        if latencies.count >= count { break }
    }
    let observed = await queryLatencies.value
    print("changes " + latencies.map(String.init).joined(separator: ","))
    print("query " + observed.map(String.init).joined(separator: ","))
    try await store.close()
}

// MARK: The harness

@main
struct StrataProcessesBench {
    static func main() async {
        let arguments = CommandLine.arguments
        if arguments.count > 2, arguments[1] == "--child" {
            let rest = Array(arguments.dropFirst(3))
            do {
                switch arguments[2] {
                case "commit": try await childCommit(rest)
                case "emit": try await childEmit(rest)
                case "observe": try await childObserve(rest)
                default: fail("unknown child \(arguments[2])", status: 2)
                }
            } catch {
                fail("child \(arguments[2]): \(error)", status: 1)
            }
            return
        }
        await runQuickHarness("strata-processes-bench") { place, quick in try await run(place: place, quick: quick) }
    }

    /// Commits per second of `processes` processes with `tasks` committers in all, on a fresh store.
    static func throughput(_ place: DataPlace, _ name: String, processes: Int, shared: Bool, tasks: Int, seconds duration: Double) throws -> Double {
        let path = place.path(name)
        try? FileManager.default.removeItem(atPath: path)
        let start = monotonicNanos() + 1_500_000_000   // every child opened by then
        let children = try (0..<processes).map { _ in
            try Child(["commit", path, shared ? "1" : "0", String(tasks / processes), String(start), String(duration)])
        }
        var total = 0
        for child in children {
            guard let n = Int(child.finish().trimmingCharacters(in: .whitespacesAndNewlines)) else { throw BenchError("a committer child failed") }
            total += n
        }
        try? FileManager.default.removeItem(atPath: path)
        return Double(total) / duration
    }

    static func run(place: DataPlace, quick: Bool) async throws {
        let rounds = quick ? 2 : 5
        let duration = quick ? 1.5 : 3.0
        var one: [Double] = [], two: [Double] = [], exclusive: [Double] = []
        for round in 0..<rounds {
            note("round \(round + 1) of \(rounds): 16 committers in one shared process, in two, and in one exclusive process")
            one.append(try throughput(place, "one", processes: 1, shared: true, tasks: 16, seconds: duration))
            two.append(try throughput(place, "two", processes: 2, shared: true, tasks: 16, seconds: duration))
            exclusive.append(try throughput(place, "exclusive", processes: 1, shared: false, tasks: 16, seconds: duration))
        }
        one.sort(); two.sort(); exclusive.sort()
        let (a, b, c) = (one[one.count / 2], two[two.count / 2], exclusive[exclusive.count / 2])

        let count = quick ? 300 : 2000
        note("latency: \(count) commits in one process, observed in another")
        let path = place.path("latency")
        // The observer opens first (its open creates the store), then the emitter.
        let observer = try Child(["observe", path, String(count)])
        let firstLine = observer.output.fileHandleForReading.availableLine()
        guard firstLine == "ready" else { throw BenchError("the observer did not start: \(firstLine ?? "nothing")") }
        let emitter = try Child(["emit", path, String(count)])
        _ = emitter.finish()
        let lines = observer.finish().split(separator: "\n")
        func values(_ prefix: String) -> [UInt64] {
            guard let line = lines.first(where: { $0.hasPrefix(prefix + " ") }) else { return [] }
            return line.dropFirst(prefix.count + 1).split(separator: ",").compactMap { UInt64($0) }.sorted()
        }
        let changes = values("changes"), query = values("query")
        guard changes.count >= count * 9 / 10 else { throw BenchError("the observer saw \(changes.count) of \(count) commits") }

        print("| row | what | result |")
        print("| --- | --- | --- |")
        print("| 1a | one process, store shared by processes, 16 one-note committers, median of \(rounds) × \(fixed(duration, 1)) s | \(rate(a)) commits/s |")
        print("| 1b | two processes, 8 committers each, one shared store | \(rate(b)) commits/s |")
        print("| 1c | one process, exclusive store (no cross-process lock), 16 committers | \(rate(c)) commits/s |")
        print("| 1 | two writer processes / one (goal ≥ 0.7×) | \(fixed(b / max(1, a), 2))× (shared / exclusive, one process: \(fixed(a / max(1, c), 2))×) |")
        print("| 2a | commit in one process → `changes()` in another, \(changes.count) commits: p50 / p99 / max | \(latency(percentile(changes, 0.5))) / \(latency(percentile(changes, 0.99))) / \(latency(changes.last ?? 0)) |")
        print("| 2b | commit in one process → an observed query (`observe(\"Note\")`) in another, \(query.count) commits: p50 / p99 / max | \(latency(percentile(query, 0.5))) / \(latency(percentile(query, 0.99))) / \(latency(query.last ?? 0)) |")
        print("| 2 | p99 commit → observed query in another process (goal ≤ 10 ms) | \(latency(percentile(query, 0.99))) |")
    }
}

extension FileHandle {
    /// The first line written to this pipe (waits for it).
    func availableLine() -> String? {
        var bytes: [UInt8] = []
        while true {
            let data = readData(ofLength: 1)
            guard let byte = data.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
