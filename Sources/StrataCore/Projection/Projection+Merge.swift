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
    /// exist yet so that removes would cancel them when they come). The credited sequence is a
    /// function of the original name (see `credit`), so one original event is one credited event
    /// everywhere it is named (an add and the removal of it stay paired); all of 1…n count as
    /// applied.
    ///
    /// The credited replica's ID is above every other: its upper 64 bits all ones, its lower 64
    /// `crediting` (a random step, ≥ 1) above the highest such ID either projection names. Equal
    /// stamps are broken by replica ID, so a device holding an event under an earlier name (its
    /// original, or a name an earlier merge credited it to, lost since with a restored server)
    /// keeps the newest name when it adopts the merged state, as a device that never saw the
    /// earlier one does: their digests agree. Returns the replica and its highest credited sequence
    /// (`nil` when none was, or without `crediting`).
    ///
    /// With `detectingChange`, the outcome also says whether the merge changed any record of this
    /// projection (applied sequences and schema events are always compared): a server folds an
    /// upload that brings nothing new into no merge at all. Off by default: it keeps a copy of
    /// each record the merge touches, which a device adopting a snapshot does not need.
    @discardableResult
    package func merge(from other: some MergeSource, believingApplied: [ReplicaID: UInt64]? = nil,
                       withholding: (replica: ReplicaID, above: UInt64)? = nil, crediting: UInt64? = nil,
                       detectingChange: Bool = false) throws -> MergeOutcome {
        var plan = try prepareMerge(from: other, believingApplied: believingApplied, withholding: withholding,
                                    crediting: crediting, detectingChange: detectingChange)
        try other.forEachRecord { id, record in
            if !plan.bringsNothing(record) { mergeRecord(id, record, plan: &plan) }
        }
        return plan.outcome(in: self)
    }

    /// Everything of a merge but the objects: names and replicas interned, the names to credit
    /// found (one pass over `other`'s objects), applied sequences and schema events merged, the
    /// credited replica's sequences counted as applied. The objects are then merged one by one
    /// with ``mergeRecord(_:_:plan:)`` — in any order, or as they stream from an upload.
    package func prepareMerge(from other: some MergeSource, believingApplied: [ReplicaID: UInt64]?,
                              withholding: (replica: ReplicaID, above: UInt64)?, crediting: UInt64?,
                              detectingChange: Bool) throws -> MergePlan {
        precondition(batchOpen, "internal: merge outside a batch")
        let withheld = withholding.flatMap { held in other.replicas.firstIndex(of: held.replica).map { (UInt32($0), held.above) } }
        var plan: MergePlan
        if let crediting {
            // An upload's tables are interned only as far as its objects use them: a name no
            // object uses, or a replica none of whose events keep their name (every event of a
            // replica the zone does not know is credited), would only bloat the zone's snapshot
            // for good (and could fill its replica table). Names of replicas the zone holds are
            // the only ones kept, with the uploader's own and those whose claims are believed.
            plan = MergePlan(names: [], replicas: [], withheld: withheld, detectingChange: detectingChange)
            let survey = try credit(other, plan: &plan, step: crediting)
            plan.credit = survey.credit
            plan.names = other.names.enumerated().map { index, name in survey.usedNames.contains(UInt32(index)) ? intern(name) : MergePlan.unmapped }
            let keep = Set(believingApplied.map { Array($0.keys) } ?? []).union(withholding.map { [$0.replica] } ?? [])
            plan.replicas = try other.replicas.map { replica in
                if let index = replicaIndex(replica) { return index }
                return keep.contains(replica) ? try internReplica(replica) : MergePlan.unmapped
            }
            if let credit = plan.credit {
                plan.credit?.replica = try internReplica(credit.replicaID)
            }
        } else {
            plan = MergePlan(names: other.names.map(intern), replicas: try other.replicas.map(internReplica), withheld: withheld, detectingChange: detectingChange)
        }
        func union(_ replica: UInt32, _ set: AppliedSet) {
            let before = applied[Int(replica)]
            unionApplied(replica, set)
            if applied[Int(replica)] != before { plan.changed = true }
        }
        for (index, set) in other.applied.enumerated() where !set.isEmpty && plan.replicas[index] != MergePlan.unmapped {
            if let believingApplied {
                guard let through = believingApplied[other.replicas[index]] else { continue }
                var capped = AppliedSet(contiguous: min(set.contiguous, through), above: set.above.filter { $0 <= through })
                if capped.contiguous < set.contiguous { capped.above = [] }
                union(plan.replicas[index], capped)
            } else {
                union(plan.replicas[index], set)
            }
        }
        for (ref, schema) in other.schemaEvents {
            let mapped = plan.map(ref)
            if mapped.isNone { continue }
            if !schemaEvents.contains(where: { $0.ref == mapped }) {
                insertSchemaEvent(schema, ref: mapped)
                plan.changed = true
            }
        }
        noteHLC(other.maxHLC)
        if let credit = plan.credit {
            unionApplied(credit.replica, AppliedSet(contiguous: credit.total, above: []))
            plan.changed = true
        }
        return plan
    }

    /// Merges one object of the state `plan` was prepared for (one ``MergePlan/bringsNothing(_:)``
    /// does not leave out).
    package func mergeRecord(_ id: ObjectID, _ record: ObjectRecord, plan: inout MergePlan) {
        let names = plan.names
        let entity = names[Int(record.entity)]
        var changed = false
        let detecting = plan.detectingChange && !plan.changed
        mergeRecord(id, entity: entity) { mine in
            let before = detecting ? mine : nil
            defer { if let before, before != mine { changed = true } }
            let inserted = plan.map(record.inserted)
            if !inserted.isNone { self.mergeInsert(&mine, object: id, entity: entity, ref: inserted) }
            let deleted = plan.map(record.deleted)
            if !deleted.isNone { self.mergeDelete(&mine, ref: deleted) }
            let dropsAssets = plan.droppingAssetsOfDeleted && StateUpload.bringsNoAssets(record)
            for slot in record.fields {
                let ref = plan.map(slot.ref)
                if ref.isNone { continue }
                if dropsAssets, case .asset = slot.value { continue }
                self.mergeField(&mine, object: id, key: names[Int(slot.key)], value: slot.value, ref: ref)
            }
            for member in record.sets {
                self.mergeMember(&mine, object: id, key: names[Int(member.key)], target: member.target,
                                 adds: member.adds.map(plan.map).filter { !$0.isNone },
                                 removed: member.removedAdds.compactMap(plan.map))
            }
        }
        if changed { plan.changed = true }
    }

    /// The marker of a credited replica: its upper 64 bits all ones.
    package static func isCredited(_ replica: ReplicaID) -> Bool { replica.rawValue >> 64 == UInt128(UInt64.max) }

    /// The names `other` holds that this projection has not applied, or holds where this one
    /// shows they cannot be (the withheld replica's left as they are): the credit that renames
    /// them to one new replica, and the index that replica gets here. Also counts, in
    /// `plan.newRecords`, the objects of `other` this projection has no record of.
    ///
    /// A name this projection has applied is believed only where it can be: an event applied
    /// here left this projection's register (insert, delete, field) at least as new as itself,
    /// and its add in the member it added. A ref under an applied name that is newer than the
    /// register here, or an add of it that the member here lacks, is a forgery (an upload
    /// passing a value off as another replica's event by naming one the zone holds): credited
    /// like an unapplied one — everywhere the name occurs in `other`.
    ///
    /// The credited sequences keep each original replica's distances: replica by replica (in
    /// the order of their IDs), a name (R, s) becomes `offset(R) + s − first(R) + 1`, where
    /// `first(R)` is the lowest credited sequence of R and the offsets follow one another. So the
    /// credit is a few numbers per replica, not an entry per event: an upload streams through in
    /// memory that does not grow with it.
    private func credit(_ other: some MergeSource, plan: inout MergePlan, step: UInt64) throws -> (credit: MergePlan.Credit?, usedNames: Set<UInt32>) {
        let sparing = plan.withheld?.0
        // Nothing is interned here: the names and replicas of `other` are looked up only.
        let known = other.replicas.map { replicaIndex($0) }
        let nameHere = other.names.map { nameID($0) }
        // What this projection holds of each of `other`'s replicas, before anything is merged.
        let held = known.map { $0.map { applied[Int($0)] } ?? AppliedSet() }
        var forged = Set<AddKey>()
        var spans: [UInt32: (first: UInt64, last: UInt64)] = [:]
        var usedNames = Set<UInt32>()
        func isApplied(_ replica: UInt32, _ sequence: UInt64) -> Bool { held[Int(replica)].contains(sequence) }
        /// Whether `theirs` (a ref of `other`) is newer than `mine` (of this projection) in the merge order.
        func newer(_ theirs: Ref, than mine: Ref) -> Bool {
            if theirs.hlc != mine.hlc { return theirs.hlc > mine.hlc }
            let a = other.replicas[Int(theirs.replica)], b = self.replicas[Int(mine.replica)]
            if a != b { return a > b }
            return theirs.sequence > mine.sequence
        }
        func take(_ replica: UInt32, _ sequence: UInt64, forgery: Bool) {
            if forgery { forged.insert(AddKey(replica: replica, sequence: sequence)) }
            if let span = spans[replica] {
                spans[replica] = (min(span.first, sequence), max(span.last, sequence))
            } else {
                spans[replica] = (sequence, sequence)
            }
        }
        func note(_ replica: UInt32, _ sequence: UInt64) {
            guard replica != sparing, !isApplied(replica, sequence) else { return }
            take(replica, sequence, forgery: false)
        }
        /// `ref`, of a register whose value here is `mine` (`nil`: none here).
        func note(_ ref: Ref, register mine: Ref?) {
            guard !ref.isNone, ref.replica != sparing else { return }
            if !isApplied(ref.replica, ref.sequence) {
                take(ref.replica, ref.sequence, forgery: false)
            } else if mine.map({ $0.isNone || newer(ref, than: $0) }) ?? true {
                take(ref.replica, ref.sequence, forgery: true)
            }
        }
        // A schema event under a name this projection holds is believed only if it is the very
        // event held here (same replica, sequence and stamp); else it is passed off as another's.
        for (ref, _) in other.schemaEvents where ref.replica != sparing {
            if !isApplied(ref.replica, ref.sequence) {
                take(ref.replica, ref.sequence, forgery: false)
            } else if let local = known[Int(ref.replica)],
                      !schemaEvents.contains(where: { $0.ref.replica == local && $0.ref.sequence == ref.sequence && $0.ref.hlc == ref.hlc }) {
                take(ref.replica, ref.sequence, forgery: true)
            }
        }
        var newRecords = 0
        try other.forEachRecord { id, record in
            let mine = records[id]
            if !plan.bringsNothing(record) {
                usedNames.insert(record.entity)
                if mine == nil { newRecords += 1 }
            }
            note(record.inserted, register: mine?.inserted)
            note(record.deleted, register: mine?.deleted)
            for slot in record.fields {
                usedNames.insert(slot.key)
                let here = mine.flatMap { mine -> Ref? in
                    guard let key = nameHere[Int(slot.key)] else { return nil }
                    let (found, index) = mine.fieldIndex(key)
                    return found ? mine.fields[index].ref : nil
                }
                note(slot.ref, register: here)
            }
            for member in record.sets {
                usedNames.insert(member.key)
                let here = mine.flatMap { mine -> SetMember? in
                    guard let key = nameHere[Int(member.key)] else { return nil }
                    let (found, index) = mine.setIndex(key, member.target)
                    return found ? mine.sets[index] : nil
                }
                // The member's adds and removals here, as a set once there are many: a member
                // with many adds would otherwise cost their product.
                var present: Set<AddKey>?
                for add in member.adds where add.replica != sparing {
                    if !isApplied(add.replica, add.sequence) {
                        take(add.replica, add.sequence, forgery: false)
                        continue
                    }
                    // Applied: the replica is known here.
                    guard let local = known[Int(add.replica)] else { continue }
                    if present == nil {
                        present = Set((here?.adds ?? []).map { AddKey(replica: $0.replica, sequence: $0.sequence) } + (here?.removedAdds ?? []))
                    }
                    if present?.contains(AddKey(replica: local, sequence: add.sequence)) != true {
                        take(add.replica, add.sequence, forgery: true)
                    }
                }
                // A removal names an add (its own name is the remove's, which the state does not
                // keep): it is checked as a name only.
                for add in member.removedAdds { note(add.replica, add.sequence) }
            }
        }
        plan.newRecords = newRecords
        guard !spans.isEmpty else { return (nil, usedNames) }
        let floor = (self.replicas + other.replicas).filter(Self.isCredited).map { UInt64(truncatingIfNeeded: $0.rawValue) }.max() ?? 0
        let (low, overflow) = floor.addingReportingOverflow(max(step, 1))
        guard !overflow else {
            throw StoreError(.invalidArgument, "the state names a credited replica at the top of their range; no newer one can be made")
        }
        var offsets: [UInt32: (first: UInt64, offset: UInt64)] = [:]
        var total: UInt64 = 0
        let tooFar = StoreError(.invalidArgument, "the state names events of other replicas too far apart to credit to one replica (more than \(Ref.maxSequence) sequences)")
        for (replica, span) in spans.sorted(by: { other.replicas[Int($0.key)] < other.replicas[Int($1.key)] }) {
            offsets[replica] = (span.first, total)
            // Sequences come from the network: every step is checked, never trapped on.
            guard span.last >= span.first, span.last - span.first < Ref.maxSequence else { throw tooFar }
            let (sum, overflowed) = total.addingReportingOverflow(span.last - span.first + 1)
            guard !overflowed, sum <= Ref.maxSequence else { throw tooFar }
            total = sum
        }
        let replicaID = ReplicaID(rawValue: UInt128(UInt64.max) << 64 | UInt128(low))
        return (MergePlan.Credit(replica: MergePlan.unmapped, replicaID: replicaID, sparing: sparing, held: held, forged: forged, offsets: offsets, total: total), usedNames)
    }
}

/// A state source a projection merges: another projection, or an uploaded snapshot read object
/// by object (``StateUpload``).
package protocol MergeSource {
    var names: [String] { get }
    var replicas: [ReplicaID] { get }
    var applied: [AppliedSet] { get }
    var schemaEvents: [(ref: Ref, schema: Schema)] { get }
    var maxHLC: UInt64 { get }
    /// Every object record (in ID order where the source has one).
    func forEachRecord(_ body: (ObjectID, ObjectRecord) throws -> Void) throws
}

extension Projection: MergeSource {
    package func forEachRecord(_ body: (ObjectID, ObjectRecord) throws -> Void) throws {
        for (id, record) in records { try body(id, record) }
    }
}

/// How one merge maps the merged state's names and replicas onto the projection's, which of its
/// events are left out (withheld) or renamed (credited), and whether anything changed so far.
package struct MergePlan {
    /// Each of the source's name indexes, here.
    var names: [UInt32]
    /// Each of the source's replica indexes, here.
    var replicas: [UInt32]
    /// The source's replica index whose events above the sequence are left out.
    var withheld: (UInt32, UInt64)?
    var detectingChange: Bool
    var credit: Credit?
    /// Whether a deleted object's asset fields are left out (an uploaded state, merged by the
    /// server: ``StateUpload/bringsNoAssets(_:)``).
    var droppingAssetsOfDeleted = false
    /// Whether anything of the projection changed (so far).
    package var changed = false
    /// The source's objects the projection had no record of (counted while crediting).
    package var newRecords = 0

    init(names: [UInt32], replicas: [UInt32], withheld: (UInt32, UInt64)?, detectingChange: Bool) {
        self.names = names
        self.replicas = replicas
        self.withheld = withheld
        self.detectingChange = detectingChange
    }

    /// An index of the source's tables that is not interned here (see `prepareMerge`).
    static let unmapped = UInt32.max

    /// The names credited to one new replica (see `Projection.credit`).
    struct Credit {
        /// The credited replica's index here.
        var replica: UInt32
        var replicaID: ReplicaID
        var sparing: UInt32?
        /// What the projection held of each source replica before the merge.
        var held: [AppliedSet]
        /// Names the projection holds that the state contradicts (by source replica index).
        var forged: Set<AddKey>
        /// Per source replica index: its lowest credited sequence and its offset.
        var offsets: [UInt32: (first: UInt64, offset: UInt64)]
        /// How many sequences the credited replica has.
        var total: UInt64

        /// The credited sequence of the source's name (`nil`: not credited).
        func sequence(_ replica: UInt32, _ sequence: UInt64) -> UInt64? {
            guard replica != sparing, let span = offsets[replica], sequence >= span.first else { return nil }
            if held[Int(replica)].contains(sequence), !forged.contains(AddKey(replica: replica, sequence: sequence)) { return nil }
            return span.offset + (sequence - span.first) + 1
        }
    }

    func map(_ ref: Ref) -> Ref {
        if ref.isNone { return ref }
        if let withheld, ref.replica == withheld.0, ref.sequence > withheld.1 { return .none }
        if let credit, let sequence = credit.sequence(ref.replica, ref.sequence) {
            return Ref(hlc: ref.hlc, sequence: sequence, replica: credit.replica)
        }
        let local = replicas[Int(ref.replica)]
        // Every name of a replica not interned here is credited; one that is not (which the
        // checks of the upload rule out) is dropped rather than stored under no replica.
        return local == Self.unmapped ? .none : Ref(hlc: ref.hlc, sequence: ref.sequence, replica: local)
    }

    /// A removal's add, here (`nil`: dropped, as ``map(_:)-(Ref)`` drops a ref).
    func map(_ add: AddKey) -> AddKey? {
        if let credit, let sequence = credit.sequence(add.replica, add.sequence) { return AddKey(replica: credit.replica, sequence: sequence) }
        let local = replicas[Int(add.replica)]
        return local == Self.unmapped ? nil : AddKey(replica: local, sequence: add.sequence)
    }

    /// Whether an object names only withheld events: it brings nothing, not even an empty record.
    /// (Decided on the withheld replica alone, so that it reads the same before the tables are
    /// mapped — when the credit pass counts the objects new here — and after.)
    func bringsNothing(_ record: ObjectRecord) -> Bool {
        guard let withheld else { return false }
        func gone(_ ref: Ref) -> Bool { ref.isNone || (ref.replica == withheld.0 && ref.sequence > withheld.1) }
        return gone(record.inserted) && gone(record.deleted)
            && record.fields.allSatisfy({ gone($0.ref) })
            && record.sets.allSatisfy({ $0.removedAdds.isEmpty && $0.adds.allSatisfy(gone) })
    }

    /// The outcome, once every object is merged.
    func outcome(in projection: Projection) -> MergeOutcome {
        MergeOutcome(changed: changed, credited: credit.map { (projection.replicas[Int($0.replica)], $0.total) })
    }
}

/// What ``Projection/merge(from:believingApplied:withholding:crediting:)`` did.
package struct MergeOutcome: Sendable {
    /// Whether anything of the projection merged into changed.
    package var changed: Bool
    /// The replica the merged state's unheld events were credited to, and how many; `nil` when none was.
    package var credited: (replica: ReplicaID, count: UInt64)?
}
