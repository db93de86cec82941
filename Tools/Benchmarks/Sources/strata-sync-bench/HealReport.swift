// How the heal workload reports: rows 4a–4d of the main table, a side-by-side table of every
// measured sync(), and the correctness checks that fail the run.
import BenchSupport
import Foundation
import StrataSync

extension HealRun {
    /// Rows 4a–4d of the main table.
    func addRows(to report: inout Report) {
        let tx = grouped(build.operations)
        report.add("4a. heal baseline: first upload of \(grouped(events)) events (\(tx) tx of \(perTransaction) inserts) by one device's sync() to its just-created zone",
                   "\(fixed(firstUpload.seconds, 2)) s; " + summary(firstUpload),
                   "— (baseline)", "—")
        report.add("4b. heal: the server restored to a copy holding the zone's first \(backupTransactions) tx; the same device's sync()",
                   "\(fixed(heal.seconds, 2)) s; " + summary(heal) + "; " + breakdown(heal),
                   "—", ratios(heal))
        report.add("4c. heal after compaction: as 4b, by a copy of the device taken after 4a and compact()ed first (\(fixed(Double(compactNanos) / 1e9, 2)) s, \(bytes(Double(storeBytesBefore))) → \(bytes(Double(storeBytesAfter))) on disk, \(grouped(ownTransactionsLeft)) of its \(grouped(build.operations + backupTransactions)) own tx left in its log)",
                   "\(fixed(healAfterCompaction.seconds, 2)) s; " + summary(healAfterCompaction) + "; " + breakdown(healAfterCompaction),
                   "—", ratios(healAfterCompaction))
        report.add("4d. a fresh device syncs each healed zone: same digest() as the healing device, \(grouped(events)) objects",
                   "after 4b: " + checkText(freshAfterHeal) + "; after 4c: " + checkText(freshAfterCompactedHeal),
                   "digest equal", problems.isEmpty ? "OK" : "**FAIL**")
    }

    /// The side-by-side table, with the run's own line of context.
    func table() -> String {
        var out = "**Healing a zone** (strata-sync-bench heal workload): \(grouped(events)) events in \(grouped(build.operations)) transactions of \(perTransaction) inserts, built at \(rate(build.eventsPerSecond)) events/s (buffered, \(healSegmentSize >> 20) MiB log segments); compact() of the copy left \(grouped(ownTransactionsLeft)) of its own tx in its log; the server's backup holds the zone with \(backupTransactions) transaction(s) (\(bytes(Double(backupBytes))) of server data). Bytes are framed bodies, states and snapshots, without HTTP headers; a failed request (the 410s that start a heal) counts as a request.\n\n"
        out += "| sync() | wall time | requests | push bodies | pull bodies | state upload | snapshot download | on the wire | server / client CPU | the engine's report | ÷ first upload (time, requests, bytes) |\n"
        out += "|---|---|---|---|---|---|---|---|---|---|---|\n"
        func row(_ name: String, _ run: MeasuredSync, ratio: Bool) {
            let w = run.wire
            let cells = [
                name,
                "\(fixed(run.seconds, 2)) s",
                grouped(w.requests),
                "\(grouped(w.pushes)) × → \(bytes(Double(w.pushBodyBytes)))",
                "\(grouped(w.pulls)) × → \(bytes(Double(w.pullBodyBytes)))",
                "\(w.stateUploads) × → \(bytes(Double(w.stateBytes)))",
                "\(w.snapshots) × → \(bytes(Double(w.snapshotBytes)))",
                bytes(Double(w.wireBytes)),
                "\(fixed(run.serverCPU, 2)) / \(fixed(run.clientCPU, 2)) s",
                engineText(run),
                ratio ? ratios(run) : "—",
            ]
            out += "| " + cells.joined(separator: " | ") + " |\n"
        }
        row("first upload", firstUpload, ratio: false)
        row("heal", heal, ratio: true)
        row("heal after compaction", healAfterCompaction, ratio: true)
        row("fresh device after the heal", freshAfterHeal.sync, ratio: true)
        row("fresh device after the compacted heal", freshAfterCompactedHeal.sync, ratio: true)
        out += "\nCheck: " + (problems.isEmpty
            ? "OK — each fresh device ends with the healing device's digest and \(grouped(events)) objects, and the heals left the device's digest unchanged."
            : "**FAIL** — " + problems.joined(separator: "; ")) + "\n"
        return out
    }

    /// What is wrong with the healed zones; empty when every check passed.
    var problems: [String] {
        var found: [String] = []
        for (name, check) in [("after the heal", freshAfterHeal), ("after the compacted heal", freshAfterCompactedHeal)] {
            if !check.digestMatches {
                found.append("the fresh device \(name) has digest \(check.digest.prefix(16))…, the healing device \(check.expectedDigest.prefix(16))…")
            }
            if check.count != events {
                found.append("the fresh device \(name) holds \(grouped(check.count)) objects, expected \(grouped(events))")
            }
        }
        if deviceDigestAfterHeal != deviceDigestBefore {
            found.append("the heal changed the device's digest (\(deviceDigestBefore.prefix(16))… → \(deviceDigestAfterHeal.prefix(16))…)")
        }
        if deviceDigestAfterCompactedHeal != deviceDigestBefore {
            found.append("the heal after compaction changed the device's digest (\(deviceDigestBefore.prefix(16))… → \(deviceDigestAfterCompactedHeal.prefix(16))…)")
        }
        return found
    }

    private func summary(_ run: MeasuredSync) -> String {
        let w = run.wire
        return "\(grouped(w.requests)) requests, \(bytes(Double(w.wireBytes))) on the wire (push bodies \(bytes(Double(w.pushBodyBytes))) in \(grouped(w.pushes)), pull bodies \(bytes(Double(w.pullBodyBytes))) in \(grouped(w.pulls)), state upload \(bytes(Double(w.stateBytes))), snapshot download \(bytes(Double(w.snapshotBytes)))); server CPU \(fixed(run.serverCPU, 2)) s, client CPU \(fixed(run.clientCPU, 2)) s; " + engineText(run)
    }

    /// Where the heal's time went: the upload (the server's merge inside), the snapshot download,
    /// and the rest (the client encoding its state, adopting the snapshot, pushing, pulling).
    private func breakdown(_ run: MeasuredSync) -> String {
        let w = run.wire
        let rest = Double(run.nanos) - Double(w.stateNanos) - Double(w.snapshotNanos) - Double(w.pushNanos) - Double(w.pullNanos)
        return "state upload answered in \(fixed(Double(w.stateNanos) / 1e9, 2)) s, snapshot downloaded in \(fixed(Double(w.snapshotNanos) / 1e9, 2)) s, pushes \(fixed(Double(w.pushNanos) / 1e9, 2)) s, pulls \(fixed(Double(w.pullNanos) / 1e9, 2)) s, the rest (client work between requests) \(fixed(max(0, rest) / 1e9, 2)) s"
    }

    private func engineText(_ run: MeasuredSync) -> String {
        let r = run.report
        var parts = ["pushed \(grouped(r.pushedTransactions)) tx", "pulled \(grouped(r.pulledTransactions)) tx"]
        if r.rewinds > 0 { parts.append("\(r.rewinds) rewind\(r.rewinds == 1 ? "" : "s")") }
        if r.bootstraps > 0 { parts.append("\(r.bootstraps) bootstrap\(r.bootstraps == 1 ? "" : "s")") }
        if r.stateUploads > 0 { parts.append("\(r.stateUploads) state upload\(r.stateUploads == 1 ? "" : "s") (\(bytes(Double(r.stateBytes))))") }
        if !r.forks.isEmpty { parts.append("\(r.forks.count) fork\(r.forks.count == 1 ? "" : "s")") }
        if !run.wire.failures.isEmpty { parts.append("answers: " + run.wire.failureText) }
        return parts.joined(separator: ", ")
    }

    private func ratios(_ run: MeasuredSync) -> String {
        func ratio(_ a: Double, _ b: Double) -> String { b == 0 ? "—" : fixed(a / b, 2) + "×" }
        let f = firstUpload
        return "time \(ratio(run.seconds, f.seconds)), requests \(ratio(Double(run.wire.requests), Double(f.wire.requests))), bytes \(ratio(Double(run.wire.wireBytes), Double(f.wire.wireBytes)))"
    }

    private func checkText(_ check: FreshCheck) -> String {
        "\(grouped(check.count)) objects, digest " + (check.digestMatches ? "OK" : "**differs**") + " (\(fixed(check.sync.seconds, 2)) s, \(bytes(Double(check.sync.wire.wireBytes))))"
    }
}
