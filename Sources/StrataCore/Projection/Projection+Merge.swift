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
    ///
    /// `crediting` asks that every event the merged state names but this one has not applied —
    /// other than the withheld replica's — be credited to a new replica: a server merging an
    /// upload keeps each value and its timestamp, but not the upload's word for whose event it was
    /// (a grantee could otherwise credit values to the owner, or name the owner's adds that do not
    /// exist yet so that removes would cancel them when they come). The events are numbered 1… in
    /// the order of their original names, so one original event is one credited event everywhere
    /// it is named (an add and the removal of it stay paired), and counted as applied.
    ///
    /// The credited replica's ID is above every other: its upper 64 bits all ones, its lower 64
    /// `crediting` (a random step, ≥ 1) above the highest such ID either projection names. Equal
    /// stamps are broken by replica ID, so a device holding an event under an earlier name (its
    /// original, or a name an earlier merge credited it to, lost since with a restored server)
    /// keeps the newest name when it adopts the merged state, as a device that never saw the
    /// earlier one does: their digests agree. Returns the replica and how many events it was
    /// credited with (`nil` when none was, or without `crediting`).
    ///
    /// With `detectingChange`, the outcome also says whether the merge changed any record of this
    /// projection (applied sequences and schema events are always compared): a server folds an
    /// upload that brings nothing new into no merge at all. Off by default: it keeps a copy of
    /// each record the merge touches, which a device adopting a snapshot does not need.
    @discardableResult
    package func merge(from other: Projection, believingApplied: [ReplicaID: UInt64]? = nil,
               withholding: (replica: ReplicaID, above: UInt64)? = nil, crediting: UInt64? = nil,
               detectingChange: Bool = false) throws -> MergeOutcome {
        precondition(batchOpen, "internal: merge outside a batch")
        let names = other.names.map(intern)
        let replicas = try other.replicas.map(internReplica)
        let withheld = withholding.flatMap { held in other.replicas.firstIndex(of: held.replica).map { (UInt32($0), held.above) } }
        let credited = try crediting.flatMap { try credit(other, names: names, replicas: replicas, sparing: withheld?.0, step: $0) }
        func map(_ ref: Ref) -> Ref {
            if ref.isNone { return ref }
            if let withheld, ref.replica == withheld.0, ref.sequence > withheld.1 { return .none }
            if let credited, let sequence = credited.sequences[AddKey(replica: ref.replica, sequence: ref.sequence)] {
                return Ref(hlc: ref.hlc, sequence: sequence, replica: credited.replica)
            }
            return Ref(hlc: ref.hlc, sequence: ref.sequence, replica: replicas[Int(ref.replica)])
        }
        func map(_ add: AddKey) -> AddKey {
            if let credited, let sequence = credited.sequences[add] { return AddKey(replica: credited.replica, sequence: sequence) }
            return AddKey(replica: replicas[Int(add.replica)], sequence: add.sequence)
        }
        var changed = false
        func union(_ replica: UInt32, _ set: AppliedSet) {
            let before = applied[Int(replica)]
            unionApplied(replica, set)
            if applied[Int(replica)] != before { changed = true }
        }
        for (index, set) in other.applied.enumerated() where !set.isEmpty {
            if let believingApplied {
                guard let through = believingApplied[other.replicas[index]] else { continue }
                var capped = AppliedSet(contiguous: min(set.contiguous, through), above: set.above.filter { $0 <= through })
                if capped.contiguous < set.contiguous { capped.above = [] }
                union(replicas[index], capped)
            } else {
                union(replicas[index], set)
            }
        }
        for (ref, schema) in other.schemaEvents {
            let mapped = map(ref)
            if mapped.isNone { continue }
            if !schemaEvents.contains(where: { $0.ref == mapped }) {
                insertSchemaEvent(schema, ref: mapped)
                changed = true
            }
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
                let before = detectingChange && !changed ? mine : nil
                defer { if let before, before != mine { changed = true } }
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
                                     removed: member.removedAdds.map(map))
                }
            }
        }
        noteHLC(other.maxHLC)
        guard let credited else { return MergeOutcome(changed: changed, credited: nil) }
        let count = UInt64(credited.sequences.count)
        unionApplied(credited.replica, AppliedSet(contiguous: count, above: []))
        return MergeOutcome(changed: true, credited: (self.replicas[Int(credited.replica)], count))
    }

    /// The marker of a credited replica: its upper 64 bits all ones.
    package static func isCredited(_ replica: ReplicaID) -> Bool { replica.rawValue >> 64 == UInt128(UInt64.max) }

    /// The events `other` names that this projection has not applied, or names where this one
    /// shows they cannot be (by `other`'s replica index; the `sparing` replica's left as they
    /// are), numbered 1… in the order of their (replica ID, sequence), and the index the credited
    /// replica gets here.
    ///
    /// A name this projection has applied is believed only where it can be: an event applied
    /// here left this projection's register (insert, delete, field) at least as new as itself,
    /// and its add in the member it added. A ref under an applied name that is newer than the
    /// register here, or an add of it that the member here lacks, is a forgery (an upload
    /// passing a value off as another replica's event by naming one the zone holds): credited
    /// like an unapplied one — everywhere the name occurs in `other`.
    private func credit(_ other: Projection, names: [UInt32], replicas: [UInt32], sparing: UInt32?, step: UInt64) throws -> (replica: UInt32, sequences: [AddKey: UInt64])? {
        var unheld = Set<AddKey>()
        func isApplied(_ replica: UInt32, _ sequence: UInt64) -> Bool { applied[Int(replicas[Int(replica)])].contains(sequence) }
        /// Whether `theirs` (a ref of `other`) is newer than `mine` (of this projection) in the merge order.
        func newer(_ theirs: Ref, than mine: Ref) -> Bool {
            if theirs.hlc != mine.hlc { return theirs.hlc > mine.hlc }
            let a = other.replicas[Int(theirs.replica)], b = self.replicas[Int(mine.replica)]
            if a != b { return a > b }
            return theirs.sequence > mine.sequence
        }
        func note(_ replica: UInt32, _ sequence: UInt64) {
            guard replica != sparing, !isApplied(replica, sequence) else { return }
            unheld.insert(AddKey(replica: replica, sequence: sequence))
        }
        func note(_ ref: Ref) { if !ref.isNone { note(ref.replica, ref.sequence) } }
        /// `ref`, of a register whose value here is `mine` (`nil`: none here).
        func note(_ ref: Ref, register mine: Ref?) {
            guard !ref.isNone, ref.replica != sparing else { return }
            if !isApplied(ref.replica, ref.sequence) || mine.map({ $0.isNone || newer(ref, than: $0) }) ?? true {
                unheld.insert(AddKey(replica: ref.replica, sequence: ref.sequence))
            }
        }
        for (ref, _) in other.schemaEvents { note(ref) }
        for (id, record) in other.records {
            let mine = records[id]
            note(record.inserted, register: mine?.inserted)
            note(record.deleted, register: mine?.deleted)
            for slot in record.fields {
                let here = mine.flatMap { mine -> Ref? in
                    let (found, index) = mine.fieldIndex(names[Int(slot.key)])
                    return found ? mine.fields[index].ref : nil
                }
                note(slot.ref, register: here)
            }
            for member in record.sets {
                let here = mine.flatMap { mine -> SetMember? in
                    let (found, index) = mine.setIndex(names[Int(member.key)], member.target)
                    return found ? mine.sets[index] : nil
                }
                for add in member.adds where add.replica != sparing {
                    let local = replicas[Int(add.replica)]
                    let held = here.map { here in
                        here.adds.contains { $0.replica == local && $0.sequence == add.sequence }
                            || here.removedAdds.contains { $0.replica == local && $0.sequence == add.sequence }
                    } ?? false
                    if !isApplied(add.replica, add.sequence) || !held { unheld.insert(AddKey(replica: add.replica, sequence: add.sequence)) }
                }
                // A removal names an add (its own name is the remove's, which the state does not
                // keep): it is checked as a name only.
                for add in member.removedAdds { note(add.replica, add.sequence) }
            }
        }
        guard !unheld.isEmpty else { return nil }
        let floor = (self.replicas + other.replicas).filter(Self.isCredited).map { UInt64(truncatingIfNeeded: $0.rawValue) }.max() ?? 0
        let (low, overflow) = floor.addingReportingOverflow(max(step, 1))
        guard !overflow else {
            throw StoreError(.invalidArgument, "the state names a credited replica at the top of their range; no newer one can be made")
        }
        let index = try internReplica(ReplicaID(rawValue: UInt128(UInt64.max) << 64 | UInt128(low)))
        let ordered = unheld.sorted { (other.replicas[Int($0.replica)], $0.sequence) < (other.replicas[Int($1.replica)], $1.sequence) }
        var sequences: [AddKey: UInt64] = [:]
        sequences.reserveCapacity(ordered.count)
        for (offset, key) in ordered.enumerated() { sequences[key] = UInt64(offset + 1) }
        return (index, sequences)
    }
}

/// What ``Projection/merge(from:believingApplied:withholding:crediting:)`` did.
package struct MergeOutcome: Sendable {
    /// Whether anything of the projection merged into changed.
    package var changed: Bool
    /// The replica the merged state's unheld events were credited to, and how many; `nil` when none was.
    package var credited: (replica: ReplicaID, count: UInt64)?
}
