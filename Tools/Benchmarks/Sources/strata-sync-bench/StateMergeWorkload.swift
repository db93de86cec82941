// Rows 7a–7b: the server's merge of an uploaded state (healing), decoded whole as it was before
// versus streamed object by object (`ProjectionBuilder.mergedPayload(with:…)`), each in a fresh
// child process whose peak resident memory above its baseline is the merge's.
import BenchSupport
import Foundation
import StrataCore

#if canImport(Glibc)
import Glibc
#endif

/// What one child measured.
struct StateMergeMeasure: Codable {
    var payloadBytes: Int
    var objects: Int
    var mergedBytes: Int
    var seconds: Double
    /// Peak resident memory above the resident memory before the merge (the payload already held).
    var growth: Int
}

enum StateMergeWorkload {
    /// The child's work: builds a state of `objects` notes (a 256-byte title each, one replica),
    /// resets the peak-memory mark, merges the state into an empty zone's state the given way
    /// (`whole` or `streamed`), and prints what it measured.
    static func child(way: String, objects: Int) throws {
        let replica = ReplicaID(rawValue: 0xABCDEF)
        let builder = ProjectionBuilder()
        let title = String(repeating: "t", count: 256)
        var sequence: UInt64 = 0
        let perTransaction = 1000
        for start in stride(from: 0, to: objects, by: perTransaction) {
            let events = (start..<min(objects, start + perTransaction)).map { index -> Event in
                sequence += 1
                return Event(id: EventID(replica: replica, sequence: sequence), hlc: HLC(milliseconds: 1_700_000_000_000 + sequence, counter: 0),
                             change: .insert(entity: "Note", object: ObjectID(rawValue: UInt128(index + 1)), fields: ["title": .string(title)]))
            }
            try builder.apply(encoded: TransactionRecord(replica: replica, events: events).encoded())
        }
        let payload = builder.snapshotPayload()
        // The builder is gone before the baseline: only the payload (the request body) is held.
        _ = consume builder
        resetPeak()
        let before = ProcessMemory.current().rss
        let start = monotonicNanos()
        let merged: [UInt8]
        switch way {
        case "whole":
            let upload = try ProjectionBuilder(snapshot: payload)
            let zone = ProjectionBuilder()
            _ = try zone.merge(upload, believingApplied: [:], crediting: 7)
            merged = zone.snapshotPayload()
        default:
            let upload = try StateUpload(payload: payload)
            merged = try ProjectionBuilder().mergedPayload(with: upload, believingApplied: [:], crediting: 7).payload ?? []
        }
        let elapsed = Double(monotonicNanos() - start) / 1e9
        let peak = ProcessMemory.current().peak
        let measure = StateMergeMeasure(payloadBytes: payload.count, objects: objects, mergedBytes: merged.count, seconds: elapsed,
                                        growth: max(0, peak - before))
        print(String(decoding: try JSONEncoder().encode(measure), as: UTF8.self))
    }

    /// Resets `VmHWM` to the current resident size (Linux: `5` into `/proc/self/clear_refs`).
    static func resetPeak() {
        _ = try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Runs both ways, one child each, and adds rows 7a–7b.
    static func run(objects: Int, into report: inout Report) throws {
        var measures: [String: StateMergeMeasure] = [:]
        for way in ["whole", "streamed"] {
            note("state merge: \(grouped(objects)) objects, \(way)…")
            let (measure, _) = try ChildRun.json(StateMergeMeasure.self, arguments: ["--state-merge-child", way, String(objects)])
            note("  \(bytes(Double(measure.payloadBytes))) upload → \(bytes(Double(measure.mergedBytes))) merged in \(fixed(measure.seconds, 2)) s, peak +\(bytes(Double(measure.growth)))")
            measures[way] = measure
        }
        guard let whole = measures["whole"], let streamed = measures["streamed"] else { return }
        let ratio = Double(whole.growth) / Double(max(1, streamed.growth))
        report.add("7a. merge an uploaded state of \(grouped(objects)) notes (\(bytes(Double(whole.payloadBytes)))) into an empty zone, decoded whole (as before)",
                   "peak memory +\(bytes(Double(whole.growth))) (\(fixed(Double(whole.growth) / Double(whole.payloadBytes), 1))× the upload) in \(fixed(whole.seconds, 2)) s",
                   "— (reference)", "—")
        report.add("7b. the same merge streamed object by object (what the server does)",
                   "peak memory +\(bytes(Double(streamed.growth))) (\(fixed(Double(streamed.growth) / Double(streamed.payloadBytes), 1))× the upload) in \(fixed(streamed.seconds, 2)) s; \(fixed(ratio, 1))× less than whole",
                   "≤ 2× the upload",
                   verdict(2 / (Double(streamed.growth) / Double(streamed.payloadBytes)), goal: 1, unit: "× goal"))
    }
}
