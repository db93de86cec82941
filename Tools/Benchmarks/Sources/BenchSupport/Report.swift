// The markdown table a run prints on stdout.

public struct Report: Sendable {
    public var machine: String
    public var rows: [[String]]

    public init(machine: String = "", rows: [[String]] = []) {
        self.machine = machine
        self.rows = rows
    }

    public mutating func add(_ workload: String, _ result: String, _ goal: String, _ verdict: String) {
        rows.append([workload, result, goal, verdict])
    }

    public func render() -> String {
        var out = machine + "\n\n"
        out += "| workload | result | goal | ratio/verdict |\n|---|---|---|---|\n"
        for row in rows { out += "| " + row.joined(separator: " | ") + " |\n" }
        return out
    }
}

/// The verdict column for a goal that is a lower bound: the ratio, then PASS or **MISS**.
public func verdict(_ ratio: Double, goal: Double, unit: String) -> String {
    "\(fixed(ratio, 2))\(unit) — " + (ratio >= goal ? "PASS" : "**MISS**")
}
