extension DecodedTransaction {
    /// The transaction with the events of every object outside `objects` turned into withheld
    /// events: the same sequences and HLCs, no content. Schema events are kept (they change what
    /// every object reads). What a partial replay applies (``ProjectionBuilder/replayingOnly``).
    package func withholding(allBut objects: ObjectFilter) -> DecodedTransaction {
        var masked = self
        for index in events.indices {
            switch events[index].kind {
            case .insert, .update, .delete, .add, .remove:
                if !objects.contains(events[index].object) { masked.events[index].kind = .withheld }
            case .schema, .withheld:
                break
            }
        }
        return masked
    }

    /// Every object an event of this transaction names besides its subject, with the subject:
    /// to-one references among the fields, and the targets of to-many adds and removes. What the
    /// objects a partial replay must include follow from (see `strata diff`).
    package func references(_ each: (_ subject: ObjectID, _ target: ObjectID) -> Void) {
        for event in events {
            switch event.kind {
            case .insert, .update:
                let start = Int(event.start)
                let end = min(fields.count, start + Int(event.count))
                for field in start..<max(start, end) {
                    if case .reference(let target) = fields[field].value { each(event.object, target) }
                }
            case .add, .remove:
                each(event.object, event.target)
            case .delete, .schema, .withheld:
                break
            }
        }
    }
}

/// A set of object IDs asked "does it hold this one?" for every event of a log, nearly always
/// answered no: a bitmap of the IDs' low bits answers most of those without hashing the ID.
package struct ObjectFilter: Sendable {
    package let objects: Set<ObjectID>
    private var bits = [UInt64](repeating: 0, count: 1024)

    package init(_ objects: Set<ObjectID>) {
        self.objects = objects
        for id in objects {
            let slot = Self.slot(id)
            bits[slot >> 6] |= 1 << UInt64(slot & 63)
        }
    }

    /// 16 bits of the ID (both halves folded, so that IDs random in either half spread).
    private static func slot(_ id: ObjectID) -> Int {
        let folded = UInt64(truncatingIfNeeded: id.rawValue >> 64) ^ UInt64(truncatingIfNeeded: id.rawValue)
        return Int(truncatingIfNeeded: (folded ^ folded >> 16 ^ folded >> 32 ^ folded >> 48) & 0xFFFF)
    }

    @inline(__always) package func contains(_ id: ObjectID) -> Bool {
        if objects.isEmpty { return false }
        let slot = Self.slot(id)
        guard bits[slot >> 6] & (1 << UInt64(slot & 63)) != 0 else { return false }
        return objects.contains(id)
    }
}
