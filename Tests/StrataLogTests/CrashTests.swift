import Foundation
import Testing
@testable import StrataLog

/// Kills a child process that appends with group commit (Tools/log-crash-child) at random
/// moments, then checks that every append it reported as acknowledged is in the log, intact.
///
/// Rounds: `STRATA_CRASH_ROUNDS` (default 200); seed: `STRATA_CRASH_SEED` (default random,
/// printed on failure so a run can be repeated).
@Suite("Crash safety")
struct CrashTests {
    /// Must match `payload(writer:sequence:entry:)` in Tools/log-crash-child/main.swift.
    static func childPayload(writer: Int, sequence: Int, entry: Int) -> [UInt8] {
        let tag = Array("w\(writer)s\(sequence)e\(entry)|".utf8)
        return tag + [UInt8](repeating: UInt8(truncatingIfNeeded: writer &* 31 &+ sequence), count: (sequence % 7) * 40)
    }

    @Test("Every acknowledged group-committed append survives SIGKILL of the appender")
    func killedAppenderLosesNothingAcknowledged() throws {
        let environment = ProcessInfo.processInfo.environment
        let rounds = Int(environment["STRATA_CRASH_ROUNDS"] ?? "") ?? 200
        let seed = UInt64(environment["STRATA_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max)
        var rng = SeededGenerator(seed: seed)
        let child = try ChildProcess.executable("log-crash-child")
        let root = TemporaryDirectory()
        var options = LogOptions(durability: .groupCommit)
        options.segmentSize = 65_536
        var totalAcks = 0
        var directory = ""

        for round in 0..<rounds {
            // A fresh log every 25 rounds keeps each reopen's full verification short.
            if round % 25 == 0 { directory = root.sub("log-\(round)") }
            let lines = try ChildProcess.runAndKill(child, arguments: [directory, "8", "65536"],
                                                    after: UInt32.random(in: 2_000...60_000, using: &rng))
            // Only whole lines count: each was written with one write(2) after its append returned.
            var acks: [(writer: Int, sequence: Int, first: LogPosition, count: Int)] = []
            for line in lines {
                let fields = line.split(separator: " ")
                if fields.first == "error" {
                    Issue.record("round \(round) (seed \(seed)): child failed: \(line)")
                }
                guard fields.count == 5, fields[0] == "ack", let w = Int(fields[1]), let s = Int(fields[2]),
                      let first = LogPosition(fields[3]), let count = Int(fields[4]) else { continue }
                acks.append((w, s, first, count))
            }
            totalAcks += acks.count

            let log: SegmentLog
            do {
                log = try SegmentLog.open(at: directory, options: options)
            } catch {
                Issue.record("round \(round) (seed \(seed)): reopen failed: \(error)")
                return
            }
            let entries = try log.entries(from: 0)
            for ack in acks {
                for i in 0..<ack.count {
                    let position = Int(ack.first) + i
                    let expected = Self.childPayload(writer: ack.writer, sequence: ack.sequence, entry: i)
                    guard position < entries.count, entries[position].payload == expected else {
                        Issue.record("round \(round) (seed \(seed)): acknowledged entry at \(position) is missing or wrong")
                        return
                    }
                }
            }
        }
        print("crash test: \(rounds) rounds, \(totalAcks) acknowledged appends checked (seed \(seed))")
        #expect(totalAcks > rounds, "the child acknowledged too little to test anything (seed \(seed))")
    }
}
