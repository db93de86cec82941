import Foundation

extension StoreDiff {
    /// A self-contained page (no scripts, no external files): both devices' timelines side by
    /// side with the divergence point marked, then the differing objects with blame.
    var html: String {
        func esc(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        func timelineRows(_ entries: [TimelineEntry]) -> String {
            entries.map { entry in
                let classes = [entry.missingOnOtherSide ? "missing" : "", entry.divergencePoint ? "point" : ""].joined(separator: " ")
                let marker = entry.divergencePoint ? "<div class=\"marker\">▼ divergence point: the first entry with an event the other device lacks</div>" : ""
                return """
                \(marker)<div class="entry \(classes)"><span class="pos">#\(entry.position)</span> <span class="time">\(esc(entry.stored))</span> \
                <span class="rep">\(esc(String(entry.replica.prefix(8)))):\(esc(entry.sequences))</span>\(entry.user.map { " <span class=\"user\">by \(esc($0))</span>" } ?? "")\
                <ul>\(entry.summary.map { "<li>\(esc($0))</li>" }.joined())</ul></div>
                """
            }.joined(separator: "\n")
        }
        func value(_ v: JSONValue?) -> String { esc(Self.show(v)) }
        var objectRows = ""
        for object in objects {
            objectRows += "<tr class=\"obj\"><td colspan=\"3\"><b>\(esc(object.entity))</b> <code>\(esc(object.object))</code>"
            if object.existsInA != object.existsInB {
                objectRows += " — A: \(esc(Self.existence(object.existsInA, object.existenceA))); B: \(esc(Self.existence(object.existsInB, object.existenceB)))"
            }
            objectRows += "</td></tr>\n"
            for field in object.fields {
                objectRows += "<tr><td>\(esc(field.field))</td><td>\(value(field.a))<div class=\"blame\">\(esc(Self.blame(field.blameA)))</div></td><td>\(value(field.b))<div class=\"blame\">\(esc(Self.blame(field.blameB)))</div></td></tr>\n"
            }
            for member in object.members {
                objectRows += "<tr><td>\(esc(member.relationship))</td><td>only here: \(esc(member.onlyInA.map { String($0.prefix(8)) }.joined(separator: ", ")))</td><td>only here: \(esc(member.onlyInB.map { String($0.prefix(8)) }.joined(separator: ", ")))</td></tr>\n"
            }
        }
        let replicaRows = replicas.map { r in
            "<tr><td><code>\(esc(String(r.replica.prefix(8))))</code>\(r.user.map { " \(esc($0))" } ?? "")</td><td>\(esc(r.inA))</td><td>\(esc(r.inB))</td><td>\(r.onlyInACount > 0 ? esc(r.onlyInA) : "")</td><td>\(r.onlyInBCount > 0 ? esc(r.onlyInB) : "")</td></tr>"
        }.joined(separator: "\n")
        return """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>strata diff</title>
        <style>
        body { font: 14px/1.4 -apple-system, system-ui, sans-serif; margin: 2em; color: #222; }
        code, .pos, .time, .rep { font-family: ui-monospace, Menlo, monospace; font-size: 12px; }
        .verdict { font-size: 18px; font-weight: bold; color: \(equal ? "#1a7f37" : "#b42318"); }
        .columns { display: grid; grid-template-columns: 1fr 1fr; gap: 2em; }
        .entry { border-left: 3px solid #ccc; padding: 2px 8px; margin: 2px 0; }
        .entry ul { margin: 0; padding-left: 1.2em; }
        .missing { border-left-color: #b42318; background: #fdecea; }
        .point { outline: 2px solid #b42318; }
        .marker { color: #b42318; font-weight: bold; margin-top: 8px; }
        table { border-collapse: collapse; margin: 1em 0; }
        td, th { border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; text-align: left; }
        tr.obj td { background: #f4f4f4; }
        .blame { color: #666; font-size: 12px; }
        .user { color: #555; font-style: italic; }
        </style></head><body>
        <h1>strata diff</h1>
        <p class="verdict">\(equal ? "Equal: the same events and the same objects." : "Diverged: \(onlyInACount) event(s) only in A, \(onlyInBCount) only in B, \(differingEvents.count) in both with different content, \(objects.count) object(s) differ.")</p>
        <p>A: <code>\(esc(a.store))</code> (replica <code>\(esc(String(a.replica.prefix(8))))</code>\(a.user.map { " by \(esc($0))" } ?? ""), \(a.eventsApplied) events\(a.digest.map { ", digest <code>\(esc(String($0.prefix(16))))</code>" } ?? ""))<br>
        B: <code>\(esc(b.store))</code> (replica <code>\(esc(String(b.replica.prefix(8))))</code>\(b.user.map { " by \(esc($0))" } ?? ""), \(b.eventsApplied) events\(b.digest.map { ", digest <code>\(esc(String($0.prefix(16))))</code>" } ?? ""))</p>
        \(firstDivergent.map { "<p><b>First divergent event</b> (earliest in merge order): \(esc(Self.describe($0)))</p>" } ?? "")
        \(warnings.map { "<p class=\"marker\">\(esc($0))</p>" }.joined())
        <h2>Seen of each replica</h2>
        <table><tr><th>replica (user)</th><th>A has</th><th>B has</th><th>only in A</th><th>only in B</th></tr>
        \(replicaRows)
        </table>
        <h2>Timelines</h2>
        <p>Each device's log in the order it stored transactions; red entries hold an event the other device lacks.</p>
        <div class="columns"><div><h3>A</h3>
        \(timelineRows(timelineA))
        </div><div><h3>B</h3>
        \(timelineRows(timelineB))
        </div></div>
        <h2>Objects that differ</h2>
        \(objects.isEmpty ? "<p>None.</p>" : "<table><tr><th>field</th><th>A</th><th>B</th></tr>\n\(objectRows)</table>")
        </body></html>
        """
    }
}
