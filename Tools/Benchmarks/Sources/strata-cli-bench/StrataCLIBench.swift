// `strata verify`, `inspect` and `diff` on a 1 M-event store, each run as the real release
// `strata` executable in a fresh process under /usr/bin/time (wall time and peak resident
// memory). Run from the repository root:
//
//     bash Tools/scripts/cli-bench.sh            # builds strata and this harness in release, runs
//     strata-cli-bench --strata PATH [--events N] [--objects N] [--data DIR] [--keep]
import BenchSupport
import Foundation
import Strata
import StrataCore
import StrataLog

@main
struct StrataCLIBench {
    static func main() async {
        var strata: String?
        var events = 1_000_000
        var objects = 100_000
        var parent: String?
        var keep = false
        var arguments = Arguments(usage: "usage: strata-cli-bench --strata PATH [--events N] [--objects N] [--data DIR] [--keep] [--quick]")
        while let argument = arguments.next() {
            switch argument {
            case "--strata": strata = arguments.value(of: argument, "a path")
            case "--events": events = arguments.number(of: argument, atLeast: 10_000)
            case "--objects": objects = arguments.number(of: argument)
            case "--data": parent = arguments.value(of: argument, "a path")
            case "--keep": keep = true
            case "--quick": events = 100_000; objects = 10_000
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        guard let strata, FileManager.default.isExecutableFile(atPath: strata) else {
            fail("--strata PATH: the release strata executable is required (Tools/scripts/cli-bench.sh builds it)", status: 2)
        }
        do {
            let place = try DataPlace.make(parent: parent, prefix: "strata-cli-bench")
            defer { if !keep { place.remove() } }
            try await run(strata: strata, events: events, objects: objects, place: place)
        } catch {
            fail("strata-cli-bench: \(error)", status: 1)
        }
    }

    static func run(strata: String, events: Int, objects: Int, place: DataPlace) async throws {
        note("building two device stores of \(grouped(events)) events on \(grouped(objects)) objects in \(place.run) (\(place.fileSystem))")
        let built = try await DivergedPair.build(in: place.run, events: events, objects: objects)
        note("built in \(fixed(built.seconds, 1)) s: A \(grouped(built.eventsA)) events, B \(grouped(built.eventsB)) events, \(bytes(Double(Machine.directorySize(built.a)))) each")

        var rows: [[String]] = []
        func measure(_ label: String, _ arguments: [String], events: Int, expectStatus: Int32) throws {
            var runs: [Timed] = []
            for _ in 0..<3 {
                let timed = try Timed.run(strata, arguments)
                guard timed.status == expectStatus else {
                    throw BenchError("\(label) exited \(timed.status), expected \(expectStatus): \(timed.stderr.suffix(400))")
                }
                runs.append(timed)
            }
            let median = runs.sorted { $0.seconds < $1.seconds }[1]
            let rate = Double(events) / median.seconds
            rows.append([label, grouped(events), fixed(median.seconds, 2) + " s", grouped(Int(rate)) + "/s",
                         bytes(Double(median.peakKiB) * 1024), rate >= 1_000_000 ? "✔" : "✘ (goal ≥ 1 M/s)"])
            note("\(label): \(fixed(median.seconds, 2)) s, \(grouped(Int(rate))) events/s, peak \(bytes(Double(median.peakKiB) * 1024))")
        }
        try measure("verify A", ["verify", built.a], events: built.eventsA, expectStatus: 0)
        try measure("inspect A", ["inspect", built.a, "--json"], events: built.eventsA, expectStatus: 0)
        try measure("diff A B (both read)", ["diff", built.a, built.b, "--json"], events: built.eventsA + built.eventsB, expectStatus: 1)
        try measure("replay A --until end", ["replay", built.a, "--entity", "Item", "--json"], events: built.eventsA, expectStatus: 0)
        try measure("merge A B --what-if", ["merge", built.a, built.b, "--what-if", "--json", "--limit", "100"], events: built.eventsA + built.eventsB, expectStatus: 0)
        // Debug bundles: plain and redacted (A's and B's under one key, so that they compare),
        // and their size next to the store's.
        let storeBytes = Machine.directorySize(built.a)
        let key = place.run + "/bench-redaction.key"
        var bundleSizes: [String] = []
        for (label, store, output, extra) in [("bundle A", built.a, "a.plain", [String]()), ("bundle A --redact", built.a, "a.redacted", ["--redact", "--key-file", key]),
                                              ("bundle B --redact", built.b, "b.redacted", ["--redact", "--key-file", key])] {
            let path = place.run + "/" + output + ".strata-bundle"
            try measure(label, ["bundle", store, "-o", path] + extra, events: store == built.a ? built.eventsA : built.eventsB, expectStatus: 0)
            let size = ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.intValue ?? 0
            bundleSizes.append("\(label): \(bytes(Double(size))) = \(fixed(Double(size) / Double(max(1, storeBytes)), 2))× the store (\(bytes(Double(storeBytes))))")
        }
        try measure("diff A.bundle B.bundle (redacted)", ["diff", place.run + "/a.redacted.strata-bundle", place.run + "/b.redacted.strata-bundle", "--json"],
                    events: built.eventsA + built.eventsB, expectStatus: 1)
        let compacted = try Timed.run(strata, ["compact", built.a])
        guard compacted.status == 0 else { throw BenchError("compact failed: \(compacted.stderr)") }
        try measure("verify A after compact (snapshot vs replay)", ["verify", built.a], events: built.eventsA, expectStatus: 0)

        print("")
        print("strata CLI on \(grouped(events))-event stores — \(Machine.cores) cores, \(Machine.memoryBytes.map { bytes($0) } ?? "?") RAM, \(place.fileSystem); median of 3 fresh processes")
        print("")
        print("| command | events read | wall | events/s | peak memory | goal |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for row in rows { print("| " + row.joined(separator: " | ") + " |") }
        print("")
        for line in bundleSizes { print("- " + line + " (goal for --redact ≤ 0.5×)") }
    }
}

/// One command run under /usr/bin/time.
struct Timed {
    var status: Int32
    var seconds: Double
    var peakKiB: Int
    var stderr: String

    static func run(_ executable: String, _ arguments: [String]) throws -> Timed {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/time")
        process.arguments = ["-f", "STRATA-BENCH %e %M", executable] + arguments
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        let started = monotonicNanos()
        try process.run()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let wall = Double(monotonicNanos() - started) / 1e9
        guard let line = errorText.split(separator: "\n").last(where: { $0.hasPrefix("STRATA-BENCH ") }) else {
            throw BenchError("/usr/bin/time printed no measurement: \(errorText.suffix(400))")
        }
        let parts = line.split(separator: " ")
        // The child's exit status: time(1) passes it through.
        return Timed(status: process.terminationStatus, seconds: wall, peakKiB: parts.count > 2 ? Int(parts[2]) ?? 0 : 0, stderr: errorText)
    }
}
