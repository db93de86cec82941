#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Strata
import StrataCore

/// `strata replay`: the projection as it was at a cutoff, or one object's whole history.
struct ReplayState: Codable, Sendable {
    var store: String
    var until: String
    /// The last log position applied, and when it was stored.
    var lastPosition: UInt64?
    var lastStored: String?
    var transactions: Int
    var events: UInt64
    var digest: String
    var snapshot: String?
    var notes: [String]
    var objects: [ObjectJSON]

    static func run(_ files: StoreFiles, until cutoff: Cutoff, entity: String?, progress: Progress?) throws -> ReplayState {
        var lastStored: Int64?
        let loaded = try LoadedStore.load(files, start: .newest, until: cutoff, progress: progress) { entry, _, applied in
            if applied { lastStored = entry.timestamp }
        }
        let projection = loaded.projection
        let ids = entity.map { projection.objectIDs(of: $0) } ?? projection.allObjectIDs()
        let objects = ids.compactMap { projection.object($0) }.sorted { ($0.entity, $0.id) < ($1.entity, $1.id) }.map(ObjectJSON.init)
        var notes = loaded.notes
        if let warning = loaded.report.readWarning { notes.append(warning) }
        return ReplayState(store: files.name, until: cutoff.description, lastPosition: loaded.lastApplied ?? loaded.base.map { $0.position == 0 ? 0 : $0.position - 1 },
                           lastStored: lastStored.map { JSONValue.isoMicroseconds($0) }, transactions: loaded.appliedTransactions,
                           events: projection.eventCount, digest: projection.digest(), snapshot: loaded.base?.name, notes: notes, objects: objects)
    }

    var text: String {
        var lines = ["\(store) as of \(until): \(objects.count) objects from \(events) events" +
                     (lastPosition.map { ", last position applied #\($0)" } ?? ", nothing applied") + (lastStored.map { " (stored \($0))" } ?? "") +
                     (snapshot.map { ", starting from snapshot \($0)" } ?? "")]
        lines.append("digest \(digest)")
        for note in notes { lines.append("note: \(note)") }
        for object in objects { lines.append(ObjectText.line(object)) }
        return lines.joined(separator: "\n")
    }
}

/// One object's history: every event that touched it, in log order, with what it did to the
/// object's current value ("blame"), and the value it ended with.
struct ObjectHistory: Codable, Sendable {
    struct Step: Codable, Sendable {
        var event: EventDescription
        /// What became of it: the fields whose current value it set, or why it has no effect now.
        var effect: String
    }
    var store: String
    var object: String
    var entity: String?
    var exists: Bool
    var until: String?
    var steps: [Step]
    var current: ObjectJSON?
    /// Field → the event that set its current value, and who pushed it (`user`: `null` when not known).
    var blame: [String: Blame]
    var notes: [String]

    /// The event that set a field's current value.
    struct Blame: Codable, Sendable, Hashable {
        var replica: String
        var sequence: UInt64
        var hlc: UInt64
        /// The HLC's physical time.
        var time: String
        var user: String?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(replica, forKey: .replica)
            try container.encode(sequence, forKey: .sequence)
            try container.encode(hlc, forKey: .hlc)
            try container.encode(time, forKey: .time)
            try container.encode(user, forKey: .user)  // null when unknown, so scripts always see it
        }

        /// `a1b2c3d4:5 by alice at 2026-…`
        var text: String {
            "\(replica.prefix(8)):\(sequence)\(Authors.by(user)) at \(time)"
        }
    }

    static func run(_ files: StoreFiles, object id: ObjectID, until cutoff: Cutoff?, progress: Progress?) throws -> ObjectHistory {
        var events: [(Event, UInt64, Int64)] = []
        // An entry can name the object only if its 16 bytes appear in it (IDs are stored raw):
        // only those entries are decoded a second time, into events.
        let idBytes = id.bytes
        var adoptions: [(UInt64, AdoptionRecord)] = []
        let loaded = try LoadedStore.load(files, start: .earliest, until: cutoff, progress: progress) { entry, header, applied in
            if header.isAdoption {
                if applied { adoptions.append((entry.position, try AdoptionRecord(decoding: entry.payload, position: entry.position))) }
                return
            }
            guard applied, Self.contains(entry.payload, idBytes) else { return }
            let record = try TransactionRecord(decoding: entry.payload)
            for event in record.events where event.change.mentions(id) {
                events.append((event, entry.position, entry.timestamp))
            }
        }
        let projection = loaded.projection
        let lifecycle = projection.lifecycle(id)
        let provenance = projection.provenance(id)
        let authors = Authors(ofStoreAt: files.directory)
        var notes = loaded.notes + authors.warnings
        if let base = loaded.base { notes.append("events before position \(base.position) are folded into the snapshot \(base.name) and not listed") }
        for (position, adoption) in adoptions {
            // Its events are not in this log: the blame below still names the events that set each value.
            notes.append("at position \(position) the store adopted \(adoption.origin) (state \(adoption.stateDigest.prefix(16))); what that state held of this object came from events not in this log")
        }
        if lifecycle == nil && events.isEmpty { throw CLIError("no event of \(files.name) names the object \(id)") }
        let steps = events.map { event, position, stored -> Step in
            Step(event: EventDescription(event, position: position, stored: stored, user: authors.user(event.id.replica)), effect: effect(of: event, on: id, lifecycle: lifecycle, provenance: provenance))
        }
        var blame: [String: Blame] = [:]
        for (field, source) in provenance {
            blame[field] = Blame(replica: source.event.replica.description, sequence: source.event.sequence, hlc: source.hlc.rawValue,
                                 time: Format.time(source.hlc), user: authors.user(source.event.replica))
        }
        return ObjectHistory(store: files.name, object: id.description, entity: lifecycle?.entity, exists: lifecycle?.exists ?? false,
                             until: cutoff?.description, steps: steps, current: projection.object(id).map(ObjectJSON.init), blame: blame,
                             notes: notes)
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        haystack.withUnsafeBytes { h in
            needle.withUnsafeBytes { n in
                guard let first = n.first, let base = h.baseAddress, let pattern = n.baseAddress, h.count >= n.count else { return false }
                var i = 0
                while i <= h.count - n.count {
                    if h[i] == first && memcmp(base + i, pattern, n.count) == 0 { return true }
                    i += 1
                }
                return false
            }
        }
    }

    private static func effect(of event: Event, on id: ObjectID, lifecycle: ObjectLifecycle?, provenance: [String: FieldProvenance]) -> String {
        switch event.change {
        case .insert(_, let object, let fields) where object == id, .update(_, let object, let fields) where object == id:
            let current = fields.keys.filter { provenance[$0]?.event == event.id }.sorted()
            let kind = event.change.kind
            if case .insert = event.change, lifecycle?.inserted?.event != event.id {
                return "an older incarnation (a newer insert replaced it)"
            }
            if current.isEmpty { return "\(kind): every field it set was overwritten by a newer event" + (lifecycle?.exists == false ? " (the object is deleted)" : "") }
            let overwritten = fields.keys.filter { provenance[$0]?.event != event.id }.sorted()
            return "\(kind): sets the current \(current.joined(separator: ", "))" + (overwritten.isEmpty ? "" : "; overwritten: \(overwritten.joined(separator: ", "))")
        case .insert(_, let object, let fields), .update(_, let object, let fields):
            let keys = fields.filter { $0.value == .reference(id) }.keys.sorted()
            return "points \(Format.short(object)).\(keys.joined(separator: ", ")) at this object"
        case .delete:
            if lifecycle?.exists == false && lifecycle?.deleted?.event == event.id { return "delete: the object is deleted by this event" }
            return "delete: undone by a newer insert"
        case .add(_, let object, let relationship, let target):
            return object == id ? "add \(Format.short(target)) to \(relationship)" : "added to \(Format.short(object)).\(relationship)"
        case .remove(_, let object, let relationship, let target, let adds):
            return object == id ? "remove \(Format.short(target)) from \(relationship) (\(adds.count) add(s) named)" : "removed from \(Format.short(object)).\(relationship)"
        default:
            return event.change.kind
        }
    }

    var text: String {
        var lines = ["\(entity ?? "?") \(object) in \(store)\(until.map { " as of \($0)" } ?? ""): \(exists ? "exists" : "does not exist")"]
        for note in notes { lines.append("note: \(note)") }
        lines.append("history (\(steps.count) events):")
        for step in steps {
            lines.append("  \(step.event.text)")
            lines.append("      → \(step.effect)")
        }
        if let current {
            lines.append("current value:")
            for key in current.values.keys.sorted() {
                lines.append("  \(key) = \(StoreDiff.show(current.values[key]))\(blame[key].map { "   ← \($0.text)" } ?? "")")
            }
            for key in current.toMany.keys.sorted() { lines.append("  \(key) = \(current.toMany[key]?.map { String($0.prefix(8)) } ?? [])") }
        }
        return lines.joined(separator: "\n")
    }
}

/// Objects in one line each, for `get`, `replay` and `export` without `--json`.
enum ObjectText {
    static func line(_ object: ObjectJSON) -> String {
        let values = object.values.keys.sorted().map { "\($0)=\(StoreDiff.show(object.values[$0]))" }
        let toMany = object.toMany.keys.sorted().map { "\($0)=[\(object.toMany[$0]?.map { String($0.prefix(8)) }.joined(separator: ",") ?? "")]" }
        return "\(object.entity) \(object.id)  " + (values + toMany).joined(separator: " ")
    }
}

extension Change {
    /// Whether the change names `id`: as its subject, a member added or removed, or the target
    /// of a reference it sets (what `replay --object` and `log --object` show).
    func mentions(_ id: ObjectID) -> Bool {
        switch self {
        case .add(_, let object, _, let target), .remove(_, let object, _, let target, _): object == id || target == id
        case .insert(_, let object, let fields), .update(_, let object, let fields): object == id || fields.values.contains(.reference(id))
        case .delete(_, let object): object == id
        case .schema, .withheld: false
        }
    }
}
