import Strata
import StrataCore

/// One event as the tools print it: where it is in the log, who wrote it, when, and what it did.
struct EventDescription: Codable, Sendable, Hashable {
    /// Its entry's position in the log read (`nil` when a snapshot holds it).
    var position: UInt64?
    /// When the device stored its transaction.
    var stored: String?
    var replica: String
    /// The user who pushed the replica's events, when the store knows it (`authors.json`).
    var user: String?
    var sequence: UInt64
    var hlc: UInt64
    /// The HLC's physical time.
    var time: String
    var kind: String
    var entity: String?
    var object: String?
    var fields: [String: JSONValue]?
    var relationship: String?
    var target: String?
    /// For a remove: the adds of the member it removes (those it saw); later or unseen adds keep
    /// the member (add-wins).
    var adds: [EventRef]?

    struct EventRef: Codable, Sendable, Hashable {
        var replica: String
        var sequence: UInt64
    }

    init(_ event: Event, position: UInt64?, stored: Int64?, user: String? = nil) {
        self.position = position
        self.stored = stored.map { JSONValue.isoMicroseconds($0) }
        replica = event.id.replica.description
        self.user = user
        sequence = event.id.sequence
        hlc = event.hlc.rawValue
        time = Format.time(event.hlc)
        kind = event.change.kind
        entity = event.change.entity
        object = event.change.object?.description
        switch event.change {
        case .insert(_, _, let values), .update(_, _, let values):
            fields = values.mapValues(JSONValue.init)
        case .add(_, _, let relationship, let target):
            self.relationship = relationship
            self.target = target.description
        case .remove(_, _, let relationship, let target, let adds):
            self.relationship = relationship
            self.target = target.description
            self.adds = adds.map { EventRef(replica: $0.replica.description, sequence: $0.sequence) }
        case .delete, .schema, .withheld:
            break
        }
        textDetail = Self.detail(event)
    }

    /// The change in a line (not part of the JSON: it repeats the fields above).
    private(set) var textDetail = ""

    enum CodingKeys: String, CodingKey {
        case position, stored, replica, user, sequence, hlc, time, kind, entity, object, fields, relationship, target, adds
    }

    /// Written out so that `user` is `null` when unknown (scripts see the field either way); the
    /// other optional fields are left out when absent, as the synthesized encoding does.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(position, forKey: .position)
        try container.encodeIfPresent(stored, forKey: .stored)
        try container.encode(replica, forKey: .replica)
        try container.encode(user, forKey: .user)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(hlc, forKey: .hlc)
        try container.encode(time, forKey: .time)
        try container.encode(kind, forKey: .kind)
        try container.encodeIfPresent(entity, forKey: .entity)
        try container.encodeIfPresent(object, forKey: .object)
        try container.encodeIfPresent(fields, forKey: .fields)
        try container.encodeIfPresent(relationship, forKey: .relationship)
        try container.encodeIfPresent(target, forKey: .target)
        try container.encodeIfPresent(adds, forKey: .adds)
    }

    /// `#12  2026-11-21T10:00:00.123Z  a1b2c3d4:5  by alice  update Note 1f2e3d4c  title="x" pinned=true`
    /// (`by …` only when the replica's user is known).
    var text: String {
        let where_ = position.map { "#\($0)" } ?? "(snapshot)"
        let by = user.map { "by \($0)  " } ?? ""
        return "\(Format.left(where_, 8)) \(time)  \(Format.left(String(replica.prefix(8)) + ":\(sequence)", 14)) \(by)\(textDetail)"
    }

    private static func detail(_ event: Event) -> String {
        switch event.change {
        case .insert(let entity, let object, let fields), .update(let entity, let object, let fields):
            let values = fields.keys.sorted().map { "\($0)=\(Format.value(fields[$0] ?? .null))" }.joined(separator: " ")
            return "\(event.change.kind) \(entity) \(Format.short(object))  \(values)"
        case .delete(let entity, let object):
            return "delete \(entity) \(Format.short(object))"
        case .add(let entity, let object, let relationship, let target):
            return "add \(entity) \(Format.short(object)).\(relationship) += \(Format.short(target))"
        case .remove(let entity, let object, let relationship, let target, let adds):
            return "remove \(entity) \(Format.short(object)).\(relationship) -= \(Format.short(target)) (adds \(adds.map(Format.event).joined(separator: ", ")))"
        case .schema(let schema):
            return "schema \(schema.entities.map(\.name).joined(separator: ", "))"
        case .withheld:
            return "withheld (left out by the download mask this store syncs with)"
        }
    }
}

/// An adoption record as `strata log` shows it: where the store merged a state from elsewhere
/// (a zone's snapshot), which one (its digest), and whether the state is still kept.
struct AdoptionDescription: Codable, Sendable {
    var position: UInt64
    var stored: String
    var kind = "adopt"
    var origin: String
    var stateDigest: String
    var contentHash: String
    var bytes: UInt64
    /// Whether the adopted state is kept beside the log (it must be while the log holds the entry).
    var kept: Bool

    init(entry: HistoryEntry, directory: String) throws {
        let record: AdoptionRecord
        do {
            record = try AdoptionRecord(decoding: entry.payload, position: entry.position)
        } catch {
            throw CLIError("\(directory): \(error) (record at byte \(entry.recordOffset) of \(entry.segment))", exitCode: ExitStatus.finding)
        }
        position = entry.position
        stored = JSONValue.isoMicroseconds(entry.timestamp)
        origin = record.origin
        stateDigest = record.stateDigest
        contentHash = record.contentHash
        bytes = record.size
        kept = (try? AdoptedStates(storeDirectory: directory).payload(for: record, position: entry.position)) != nil
    }

    var text: String {
        "#\(position) \(stored) adopt \(origin): state \(stateDigest.prefix(16)), \(bytes) bytes" + (kept ? "" : " (THE ADOPTED STATE IS MISSING)")
    }
}
