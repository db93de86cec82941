/// Counts of a history's events by kind and entity, its schema events and each replica's
/// sequences — read from encoded transactions without building events, so that tools can
/// summarise a million-event log at several million events a second. Adding a transaction also
/// checks that it decodes completely.
package struct EventTally: Sendable {
    /// Events by kind: insert, update, delete, add, remove, schema, withheld.
    public var byKind: [String: Int] {
        var result: [String: Int] = [:]
        for kind in [EventCodec.Kind.insert, .update, .delete, .add, .remove, .schema, .withheld] where kindCounts[Int(kind.rawValue)] > 0 {
            result[Self.name(kind)] = kindCounts[Int(kind.rawValue)]
        }
        return result
    }
    /// Events by entity (schema and withheld events have none).
    public private(set) var byEntity: [String: Int] = [:]
    public private(set) var events = 0
    public private(set) var transactions = 0
    /// Adoption records (states the store adopted from a zone: `AdoptionRecord`).
    public private(set) var adoptions = 0
    /// The schemas recorded by schema events, in the order read.
    public private(set) var schemas: [Schema] = []

    /// Indexed by the kind's raw value (1 through 7).
    private var kindCounts = [Int](repeating: 0, count: 8)

    public init() {}

    /// Decodes one encoded transaction (a log entry) completely and counts its events.
    ///
    /// - Parameters:
    ///   - bytes: the encoded transaction.
    ///   - position: the entry's log position, named in errors.
    /// - Returns: the transaction's header (author, sequences).
    /// - Throws: ``StoreError/Code/corruptEvent`` saying what is wrong and at which byte.
    @discardableResult
    public mutating func add(encoded bytes: [UInt8], position: UInt64? = nil) throws -> TransactionHeader {
        // An adoption record holds no events: checked, counted apart.
        if AdoptionRecord.isAdoption(bytes) {
            let header = try TransactionHeader(decoding: bytes, position: position)
            adoptions += 1
            return header
        }
        let t = try EventCodec.decodeRaw(bytes, position: position)
        transactions += 1
        events += t.events.count
        // Per name index first: one string-keyed update per entity per transaction, not per event.
        var perName = [Int](repeating: 0, count: t.names.count)
        var minHLC = UInt64.max
        for e in t.events {
            kindCounts[Int(e.kind.rawValue)] += 1
            if e.kind != .schema, e.kind != .withheld, Int(e.entity) < perName.count { perName[Int(e.entity)] += 1 }
            minHLC = min(minHLC, e.hlc)
        }
        for (index, count) in perName.enumerated() where count > 0 { byEntity[t.names[index], default: 0] += count }
        schemas.append(contentsOf: t.schemas)
        return TransactionHeader(replica: t.replica, firstSequence: t.firstSequence, eventCount: UInt64(t.events.count),
                                 baseHLC: HLC(rawValue: t.events.isEmpty ? 0 : minHLC))
    }

    private static func name(_ kind: EventCodec.Kind) -> String {
        switch kind {
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
