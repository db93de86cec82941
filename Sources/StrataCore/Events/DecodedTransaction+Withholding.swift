extension DecodedTransaction {
    /// The transaction with the events of every object outside `objects` turned into withheld
    /// events: the same sequences and HLCs, no content. Schema events are kept (they change what
    /// every object reads). What a partial replay applies (``ProjectionBuilder/replayingOnly``).
    package func withholding(allBut objects: Set<ObjectID>) -> DecodedTransaction {
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
