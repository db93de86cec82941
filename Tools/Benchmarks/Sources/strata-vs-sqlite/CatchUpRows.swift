// W3 is strata-sync-bench's catch-up (not measured again here): its report's rows 2a and 2b
// (pull limits 1000 and 10,000) and its machine line are carried into this report as they are.
import BenchSupport
import Foundation

struct CatchUpRows {
    /// The rows, each as sync-bench's four cells: workload, result, goal, ratio/verdict.
    var rows: [[String]]
    var machine: String

    static func read(_ path: String) throws -> CatchUpRows {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var rows: [[String]] = []
        var machine = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("**Machine:**") { machine = String(line) }
            guard line.hasPrefix("| 2a.") || line.hasPrefix("| 2b.") else { continue }
            var cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.first == "" { cells.removeFirst() }
            if cells.last == "" { cells.removeLast() }
            rows.append(cells)
        }
        guard !rows.isEmpty else { throw BenchError("\(path) has no catch-up rows (| 2a. / | 2b.): did strata-sync-bench fail?") }
        return CatchUpRows(rows: rows, machine: machine)
    }

    /// The first "NNNk events/s" in a row's result cell.
    static func eventsPerSecond(_ row: [String]) -> Double? {
        guard row.count > 1, let range = row[1].range(of: " events/s") else { return nil }
        let number = row[1][..<range.lowerBound].split(separator: " ").last.map(String.init) ?? ""
        var scale = 1.0
        var digits = Substring(number)
        if digits.hasSuffix("k") { scale = 1e3; digits = digits.dropLast() }
        if digits.hasSuffix("M") { scale = 1e6; digits = digits.dropLast() }
        return Double(digits).map { $0 * scale }
    }
}
