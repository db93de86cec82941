import StrataLog

/// One change to the object graph. Events are what the log stores and what sync exchanges.
public struct Event: Sendable, Hashable {
    /// The replica that authored it and its sequence number there.
    public var id: EventID
    public var hlc: HLC
    public var change: Change

    public init(id: EventID, hlc: HLC, change: Change) {
        self.id = id
        self.hlc = hlc
        self.change = change
    }

    /// The event's place in the total order of the merge rule.
    public var stamp: EventStamp { EventStamp(hlc: hlc, replica: id.replica, sequence: id.sequence) }
}

/// What an event does.
public enum Change: Sendable, Hashable {
    /// A new object with every attribute (defaults filled in) and its to-one references.
    case insert(entity: String, object: ObjectID, fields: [String: Value])
    /// Changed attributes and to-one references only.
    case update(entity: String, object: ObjectID, fields: [String: Value])
    case delete(entity: String, object: ObjectID)
    /// Adds `target` to a to-many relationship (an add-wins set).
    case add(entity: String, object: ObjectID, relationship: String, target: ObjectID)
    /// Removes `target` from a to-many relationship: exactly the adds named (those the authoring
    /// replica had seen), so that a concurrent add wins.
    case remove(entity: String, object: ObjectID, relationship: String, target: ObjectID, adds: [EventID])
    /// The schema the authoring replica recorded.
    case schema(Schema)
    /// An event a server left out of a pull because the device's download mask excludes what it
    /// changes (see `DownloadMask`): it holds its place in the replica's sequence and nothing else.
    case withheld

    public var entity: String? {
        switch self {
        case .insert(let e, _, _), .update(let e, _, _), .delete(let e, _), .add(let e, _, _, _), .remove(let e, _, _, _, _): e
        case .schema, .withheld: nil
        }
    }

    public var object: ObjectID? {
        switch self {
        case .insert(_, let o, _), .update(_, let o, _), .delete(_, let o), .add(_, let o, _, _), .remove(_, let o, _, _, _): o
        case .schema, .withheld: nil
        }
    }

    public var kind: String {
        switch self {
        case .insert: "insert"
        case .update: "update"
        case .delete: "delete"
        case .add: "add"
        case .remove: "remove"
        case .schema: "schema"
        case .withheld: "withheld"
        }
    }
}

/// The events of one transaction, all authored by one replica with consecutive sequence numbers.
/// One transaction is one log entry.
public struct TransactionRecord: Sendable, Hashable {
    public var replica: ReplicaID
    public var events: [Event]

    public init(replica: ReplicaID, events: [Event]) {
        self.replica = replica
        self.events = events
    }

    public var sequences: ClosedRange<UInt64>? {
        guard let first = events.first, let last = events.last else { return nil }
        return first.id.sequence...last.id.sequence
    }
}

extension TransactionRecord {
    /// The transaction's binary encoding: what a log entry holds and what sync sends (layout in
    /// the event format article of `Strata`).
    public func encoded() -> [UInt8] { EventCodec.encode(self) }

    /// Decodes a transaction from its binary encoding.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` saying what is wrong and at which byte.
    public init(decoding bytes: [UInt8]) throws {
        self = try EventCodec.decode(bytes, position: nil)
    }
}

/// What a transaction's first bytes say: who wrote it and which of their sequence numbers it
/// holds. Reading it skips the events, so tools can index a long history cheaply.
public struct TransactionHeader: Sendable, Hashable {
    public var replica: ReplicaID
    /// The sequences of the transaction's events (consecutive); empty when it has none.
    public var firstSequence: UInt64
    public var eventCount: UInt64
    /// The smallest HLC of its events.
    public var baseHLC: HLC

    public var sequences: Range<UInt64> { firstSequence..<(firstSequence + eventCount) }

    /// Whether the entry is an `AdoptionRecord` rather than a transaction: it then holds no
    /// events (`eventCount` 0) of no replica (the all-zero ID), so every reader that indexes
    /// headers passes over it, and only the readers that rebuild state act on it.
    public var isAdoption: Bool = false

    /// Reads the header of an encoded transaction (a log entry), or of an adoption record.
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the bytes are too short or of an unknown
    ///   version.
    public init(decoding bytes: [UInt8], position: UInt64? = nil) throws {
        if AdoptionRecord.isAdoption(bytes) {
            _ = try AdoptionRecord(decoding: bytes, position: position)
            self.init(replica: ReplicaID(rawValue: 0), firstSequence: 0, eventCount: 0, baseHLC: HLC(rawValue: 0))
            isAdoption = true
            return
        }
        let parsed: TransactionHeader? = bytes.withUnsafeBytes { raw in
            var r = ByteReader(raw)
            guard r.u8() == EventCodec.formatVersion, let replica = r.bytes(16), let first = r.varint(), let count = r.varint(),
                  let base = r.u64(), first <= UInt64.max - count, count <= UInt64(raw.count)
            else { return nil }
            return TransactionHeader(replica: ReplicaID(bytes: replica), firstSequence: first, eventCount: count, baseHLC: HLC(rawValue: base))
        }
        guard let parsed else { throw StoreError(.corruptEvent, "truncated or unknown transaction header", position: position) }
        self = parsed
    }

    package init(replica: ReplicaID, firstSequence: UInt64, eventCount: UInt64, baseHLC: HLC) {
        self.replica = replica
        self.firstSequence = firstSequence
        self.eventCount = eventCount
        self.baseHLC = baseHLC
    }
}
