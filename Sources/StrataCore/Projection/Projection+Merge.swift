extension Projection {
    /// Merges an adopted state (a projection snapshot payload) wholly into this one — every value,
    /// every claim of applied events — as `Store.adoptSnapshot(_:origin:)` did when the
    /// store adopted it: what replaying an `AdoptionRecord` does. Inside a batch.
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` when the payload does not decode.
    package func adopt(payload: [UInt8]) throws {
        let other = Projection()
        try ProjectionCodec.decode(payload, into: other)
        try merge(from: other)
        schema = recordedSchema.merged(with: schema)
    }

    /// Merges another projection's whole state into this one (inside an open batch): the join of
    /// the two, as if every event either had applied were applied here. Registers keep the newer
    /// value, inserts and deletes the newer event, sets the union of adds and removals, applied
    /// sequences their union. Used to adopt a server's zone snapshot when a client's history is
    /// too old to catch up event by event: nothing this store has (its unpushed edits) is lost,
    /// and nothing the snapshot has (remote deletes) is missed.
    ///
    /// `believingApplied` names the replicas whose applied sequences are taken over, and up to
    /// which sequence (`nil`: all, wholly). A server merging a state a client uploaded believes
    /// its values, but its claims of which events are done only for the uploader's own replica and
    /// only as far as the server had acknowledged them to it — else a forged claim would make
    /// every device skip another replica's events when they really arrive, and a copy's claim
    /// would hide that two copies wrote different events under the same sequences.
    ///
    /// `withholding` names a replica whose effects above a sequence are not merged: the uploader's
    /// own events past its claim, which it pushes as events instead — where the server checks
    /// them against what another copy of the store pushed under the same sequences (one of the
    /// copies then forks), rather than taking both copies' values under one event's name.
    package func merge(from other: Projection, believingApplied: [ReplicaID: UInt64]? = nil,
               withholding: (replica: ReplicaID, above: UInt64)? = nil) throws {
        precondition(batchOpen, "internal: merge outside a batch")
        let names = other.names.map(intern)
        let replicas = try other.replicas.map(internReplica)
        let withheld = withholding.flatMap { held in other.replicas.firstIndex(of: held.replica).map { (UInt32($0), held.above) } }
        func map(_ ref: Ref) -> Ref {
            if ref.isNone { return ref }
            if let withheld, ref.replica == withheld.0, ref.sequence > withheld.1 { return .none }
            return Ref(hlc: ref.hlc, sequence: ref.sequence, replica: replicas[Int(ref.replica)])
        }
        for (index, set) in other.applied.enumerated() where !set.isEmpty {
            if let believingApplied {
                guard let through = believingApplied[other.replicas[index]] else { continue }
                var capped = AppliedSet(contiguous: min(set.contiguous, through), above: set.above.filter { $0 <= through })
                if capped.contiguous < set.contiguous { capped.above = [] }
                unionApplied(replicas[index], capped)
            } else {
                unionApplied(replicas[index], set)
            }
        }
        for (ref, schema) in other.schemaEvents {
            let mapped = map(ref)
            if mapped.isNone { continue }
            if !schemaEvents.contains(where: { $0.ref == mapped }) { insertSchemaEvent(schema, ref: mapped) }
        }
        for (id, record) in other.records {
            let entity = names[Int(record.entity)]
            // An object that only withheld events named brings nothing: no empty record for it.
            if withheld != nil, map(record.inserted).isNone, map(record.deleted).isNone,
               record.fields.allSatisfy({ map($0.ref).isNone }),
               record.sets.allSatisfy({ $0.removedAdds.isEmpty && $0.adds.allSatisfy { map($0).isNone } }) {
                continue
            }
            mergeRecord(id, entity: entity) { mine in
                let inserted = map(record.inserted)
                if !inserted.isNone { self.mergeInsert(&mine, object: id, entity: entity, ref: inserted) }
                let deleted = map(record.deleted)
                if !deleted.isNone { self.mergeDelete(&mine, ref: deleted) }
                for slot in record.fields {
                    let ref = map(slot.ref)
                    if ref.isNone { continue }
                    self.mergeField(&mine, object: id, key: names[Int(slot.key)], value: slot.value, ref: ref)
                }
                for member in record.sets {
                    self.mergeMember(&mine, object: id, key: names[Int(member.key)], target: member.target,
                                     adds: member.adds.map(map).filter { !$0.isNone },
                                     removed: member.removedAdds.map { AddKey(replica: replicas[Int($0.replica)], sequence: $0.sequence) })
                }
            }
        }
        noteHLC(other.maxHLC)
    }
}
