/// The dashboard's HTML, built as text: every value that comes from a user, a device or the
/// storage goes through ``escape(_:)``. No script, no external resource: the pages work without
/// JavaScript, and a strict Content-Security-Policy keeps it that way.
enum DashboardHTML {
    /// `text` safe in an element's content and in a quoted attribute.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// A path segment safe in a URL (percent-encoded outside `[A-Za-z0-9._@-]`).
    static func segment(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// A whole page: `title` and `body` (already HTML).
    static func page(_ title: String, _ body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(title)) · Strata</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
        h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
        table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
        th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
        .bad{background:#fde2e1;color:#8a1c12;font-weight:600}.ok{color:#1b6e2c}.warn{color:#8a6100}
        code{font-size:.95em;background:#f6f6f6;padding:0 .2em}nav a{margin-right:1em}
        </style></head><body>
        <nav><a href="/dashboard">Overview</a></nav>
        \(body)
        </body></html>
        """
    }

    /// A table of `rows` (cells already HTML) under `headers`; `numeric` columns align right.
    static func table(_ headers: [String], _ rows: [[String]], numeric: Set<Int> = [], rowClass: (Int) -> String? = { _ in nil }) -> String {
        var html = "<table><thead><tr>" + headers.map { "<th>\(escape($0))</th>" }.joined() + "</tr></thead><tbody>"
        for (index, row) in rows.enumerated() {
            let cls = rowClass(index).map { " class=\"\($0)\"" } ?? ""
            html += "<tr\(cls)>" + row.enumerated().map { numeric.contains($0.offset) ? "<td class=\"n\">\($0.element)</td>" : "<td>\($0.element)</td>" }.joined() + "</tr>"
        }
        return html + "</tbody></table>"
    }

    /// Bytes as text (KiB, MiB, GiB).
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(max(0, count))
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : "\((value * 10).rounded() / 10) \(units[unit])"
    }
}
