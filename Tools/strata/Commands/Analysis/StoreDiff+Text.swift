extension StoreDiff {
    /// The report for a terminal: sides, replicas, missing events, differing fields with blame.
    var text: String {
        var lines: [String] = []
        lines.append("A  \(a.store)  replica \(Self.replica(a.replica, a.user))  \(a.eventsApplied) events\(a.digest.map { "  digest \($0.prefix(16))" } ?? "")")
        lines.append("B  \(b.store)  replica \(Self.replica(b.replica, b.user))  \(b.eventsApplied) events\(b.digest.map { "  digest \($0.prefix(16))" } ?? "")")
        for warning in warnings { lines.append("warning: \(warning)") }
        if equal {
            lines.append("")
            lines.append("equal: both stores have applied the same events and hold the same objects")
            return lines.joined(separator: "\n")
        }
        lines.append("")
        lines.append("seen of each replica")
        for r in replicas {
            let marks = (r.onlyInACount > 0 ? "  only in A: \(r.onlyInA)" : "") + (r.onlyInBCount > 0 ? "  only in B: \(r.onlyInB)" : "")
            lines.append("  \(Self.replica(r.replica, r.user))  A \(r.inA)  B \(r.inB)\(marks)")
        }
        lines.append("")
        lines.append("events only in A: \(onlyInACount), only in B: \(onlyInBCount), in both with different content: \(differingEvents.count)\(differingTruncated ? "+" : "")")
        if let digests = digestComparison {
            lines.append("events both hold with their content, compared by digests: \(digests.compared)")
        }
        if let first = firstDivergent {
            lines.append("first divergent event (earliest in merge order): \(Self.describe(first))")
        }
        for (label, list, count) in [("only in A", onlyInA, onlyInACount), ("only in B", onlyInB, onlyInBCount)] where !list.isEmpty {
            lines.append("\(label):")
            for missing in list.prefix(20) { lines.append("  " + Self.describe(missing)) }
            if count > 20 { lines.append("  … \(count - 20) more (--json lists \(list.count))") }
        }
        if !differingEvents.isEmpty {
            lines.append("in both with different content (same replica and sequence, two events):")
            for event in differingEvents.prefix(20) {
                lines.append("  \(Self.event(event.replica, event.sequence, event.user))")
                lines.append("    A: \(event.a.map { "#\($0.position.map(String.init) ?? "-"), \($0.time): \($0.textDetail)" } ?? "(not in A's log)")")
                lines.append("    B: \(event.b.map { "#\($0.position.map(String.init) ?? "-"), \($0.time): \($0.textDetail)" } ?? "(not in B's log)")")
            }
            if differingEvents.count > 20 { lines.append("  … \(differingEvents.count - 20) more (--json lists them)") }
        }
        lines.append("")
        if objects.isEmpty {
            lines.append("no object differs (the differing events changed nothing visible)")
        } else {
            lines.append("objects that differ: \(objects.count)")
        }
        for object in objects.prefix(50) {
            lines.append("  \(object.entity) \(object.object)")
            if object.existsInA != object.existsInB {
                lines.append("    exists in \(object.existsInA ? "A" : "B") only — A: \(Self.existence(object.existsInA, object.existenceA))  B: \(Self.existence(object.existsInB, object.existenceB))")
            }
            for field in object.fields {
                lines.append("    \(field.field): A \(Self.show(field.a)) \(Self.blame(field.blameA))")
                lines.append("    \(String(repeating: " ", count: field.field.count))  B \(Self.show(field.b)) \(Self.blame(field.blameB))")
            }
            for member in object.members {
                lines.append("    \(member.relationship): only in A \(member.onlyInA.map { String($0.prefix(8)) }), only in B \(member.onlyInB.map { String($0.prefix(8)) })")
            }
        }
        if objects.count > 50 { lines.append("  … \(objects.count - 50) more objects (--json lists them all)") }
        return lines.joined(separator: "\n")
    }

    static func describe(_ missing: MissingEvent) -> String {
        let holder = missing.heldBy == "both" ? "both, with different content (the earlier version shown)" : missing.heldBy.uppercased()
        guard let event = missing.event else {
            return "\(Self.event(missing.replica, missing.sequence, missing.user)) (in \(holder)'s snapshot)"
        }
        return "\(Self.event(event.replica, event.sequence, missing.user ?? event.user)) in \(holder) at #\(event.position.map(String.init) ?? "-"), \(event.time): \(event.textDetail)"
    }

    static func blame(_ blame: Blame?) -> String {
        guard let blame else { return "(no event: default or absent)" }
        let at = blame.position.map { "#\($0)" } ?? "snapshot"
        return "← set by \(Self.event(blame.replica, blame.sequence, blame.user)) at \(blame.time) (\(at))\(blame.seenByOther ? "" : ", which the other store has not seen")"
    }

    static func existence(_ exists: Bool, _ blame: Blame?) -> String {
        guard let blame else { return exists ? "exists" : "never seen" }
        return "\(exists ? "inserted" : "deleted") by \(Self.event(blame.replica, blame.sequence, blame.user)) at \(blame.time)\(blame.seenByOther ? "" : " (unseen by the other)")"
    }

    static func show(_ value: JSONValue?) -> String {
        switch value {
        case nil: return "(absent)"
        case .string(let s)?: return "\"\(s)\""
        case .null?: return "null"
        case .bool(let b)?: return String(b)
        case .integer(let i)?: return String(i)
        case .double(let d)?: return String(d)
        case let other?: return (try? JSONOutput.string(other, pretty: false)) ?? "?"
        }
    }
}
