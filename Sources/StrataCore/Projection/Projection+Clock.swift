extension Projection {
    /// The newest HLC of `replica`'s events that the projection still records (the events that
    /// set a visible or superseded value, inserts, deletes, adds, schema events). Used only when
    /// the newest HLC of all lies beyond what the clock may be dragged to (see
    /// `StoreOptions.maxClockLead`), so that a replica's clock never falls behind its own
    /// earlier events: a full scan, but a rare one.
    package func newestHLC(of replica: ReplicaID) -> UInt64 {
        guard let index = replicas.firstIndex(of: replica).map(UInt32.init) else { return 0 }
        var newest: UInt64 = 0
        func note(_ ref: Ref) {
            if !ref.isNone && ref.replica == index && ref.hlc > newest { newest = ref.hlc }
        }
        for record in records.values {
            note(record.inserted)
            note(record.deleted)
            for slot in record.fields { note(slot.ref) }
            for member in record.sets { member.adds.forEach(note) }
        }
        for event in schemaEvents { note(event.ref) }
        return newest
    }
}
