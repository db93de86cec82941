import StrataLog

/// A projection built outside a store, from snapshots and log entries: what the log server keeps
/// per zone to serve snapshots, and what the tools replay a copied store's history into (to any
/// point, read-only) to inspect, verify and compare devices.
///
/// Not thread-safe; one builder per task.
public final class ProjectionBuilder {
    package let projection = Projection()
    /// The store's identity, whose lineage says which transactions a fork abandoned (see
    /// `StoreIdentity.isAbandoned(header:position:)`); `nil` applies everything.
    public var identity: StoreIdentity?
    /// Where the store being replayed keeps the states it adopted: an `AdoptionRecord` entry
    /// merges the state it names from here (`nil`: such an entry is refused, as a zone's log on
    /// a server never holds one).
    package var adoptedStates: AdoptedStates?
    /// A partial replay (`nil`: a full one): only the events of these objects, and every schema
    /// event, change the state; every other event counts as applied (its sequence and HLC, as a
    /// withheld event does) and changes nothing. An object's record then holds what a full
    /// replay's would, and so does everything that reads only records of this set: what `diff`
    /// needs of the objects differing events reach, without building a million others. An
    /// adoption record still adopts its whole state. (``apply(encoded:position:visit:)`` hands
    /// `visit` the transaction as decoded, not as masked.)
    package var replayingOnly: Set<ObjectID>? {
        didSet { replayFilter = replayingOnly.map(ObjectFilter.init) }
    }
    private var replayFilter: ObjectFilter?

    public init(identity: StoreIdentity? = nil) {
        self.identity = identity
    }

    /// Starts from a snapshot payload (as ``snapshotPayload()`` wrote it).
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot``.
    public init(snapshot payload: [UInt8], identity: StoreIdentity? = nil) throws {
        self.identity = identity
        try ProjectionCodec.decode(payload, into: projection)
        projection.schema = projection.recordedSchema
    }

    /// Whether the entry at `position` is one a fork abandoned (and ``apply(encoded:position:)``
    /// skips).
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the header does not decode.
    public func isAbandoned(encoded bytes: [UInt8], position: UInt64) throws -> Bool {
        guard let identity, !identity.lineage.isEmpty, !AdoptionRecord.isAdoption(bytes) else { return false }
        return identity.isAbandoned(header: try TransactionHeader(decoding: bytes, position: position), position: position)
    }

    /// Applies one encoded transaction (a log entry); returns the events newly applied. An entry
    /// that the identity's lineage abandoned (known by its `position`) applies nothing.
    ///
    /// - Parameters:
    ///   - bytes: the encoded transaction (a log entry).
    ///   - position: the entry's log position, named in errors.
    /// - Throws: ``StoreError/Code/corruptEvent`` saying what is wrong, at which byte and position.
    @discardableResult
    public func apply(encoded bytes: [UInt8], position: UInt64? = nil) throws -> Int {
        try apply(encoded: bytes, position: position, decoded: { _ in })
    }

    private func apply(encoded bytes: [UInt8], position: UInt64?, decoded: (DecodedTransaction) -> Void) throws -> Int {
        if let position, try isAbandoned(encoded: bytes, position: position) { return 0 }
        if AdoptionRecord.isAdoption(bytes), let adoptedStates {
            let record = try AdoptionRecord(decoding: bytes, position: position)
            let payload = try adoptedStates.payload(for: record, position: position)
            let before = projection.eventCount
            projection.beginBatch(tracking: false)
            do {
                try projection.adopt(payload: payload)
            } catch {
                projection.commitBatch(report: false)
                throw error
            }
            projection.commitBatch(report: false)
            return Int(projection.eventCount &- before)
        }
        let transaction = try EventCodec.decodeRaw(bytes, position: position)
        projection.beginBatch(tracking: false)
        defer { projection.commitBatch(report: false) }
        let applied = try projection.apply(replayFilter.map { transaction.withholding(allBut: $0) } ?? transaction)
        decoded(transaction)
        return applied
    }

    /// ``apply(encoded:position:)``, handing the transaction it decoded to `visit` once applied
    /// (not for an adoption record, nor for a transaction a fork abandoned): a reader that needs
    /// the decoded events too (the tools' history digests) decodes them once.
    package func apply(encoded bytes: [UInt8], position: UInt64?, visit: (DecodedTransaction) -> Void) throws -> Int {
        try apply(encoded: bytes, position: position, decoded: visit)
    }

    /// Merges another builder's whole state (a device's projection, say) into this one: the join
    /// of the two (see `Store.adoptSnapshot(_:)`). Its values are all merged; its claims of
    /// which events it has applied only for the replicas in `believingApplied`, up to the sequence
    /// given (`nil`: all, wholly). A server merging a state a client uploaded believes those
    /// claims for the uploader's own replica only, and only as far as it acknowledged them, so
    /// that its applied sequences stay what its log holds for everyone else's.
    ///
    /// `withholding` leaves out the effects of one replica's events above a sequence (an
    /// uploader's own events past its claim, which it pushes as events, checked).
    ///
    /// `crediting` (a random step) credits every event `other` names that this state has not
    /// applied (other than the withheld replica's) to a new replica above every other: the values
    /// are merged, the names they came with are not believed. Returns whether anything of this
    /// state changed, and that replica with its highest credited sequence (`nil` when none was;
    /// see the credit's numbering in the sync protocol article).
    @discardableResult
    public func merge(_ other: ProjectionBuilder, believingApplied: [ReplicaID: UInt64]?,
                      withholding: (replica: ReplicaID, above: UInt64)? = nil,
                      crediting: UInt64? = nil) throws -> (changed: Bool, credited: (replica: ReplicaID, count: UInt64)?) {
        projection.beginBatch(tracking: false)
        defer { projection.commitBatch(report: false) }
        let outcome = try projection.merge(from: other.projection, believingApplied: believingApplied, withholding: withholding,
                                           crediting: crediting, detectingChange: true)
        return (outcome.changed, outcome.credited)
    }

    /// Merges an uploaded state into this one as ``merge(_:believingApplied:withholding:crediting:)``
    /// does (crediting always), object by object as the upload is read, and returns the merged state's snapshot
    /// payload (`nil` when the merge changed nothing) with the credited replica. Written for a
    /// server, which keeps the merged state only as that payload: the objects are written out in
    /// ID order as they are merged, and an object this state did not have is dropped again once
    /// written, so the memory a merge takes is the upload's bytes and the payload it writes, not a
    /// decoded copy of either state.
    ///
    /// The builder is spent afterwards: it is left empty.
    public func mergedPayload(with upload: StateUpload, believingApplied: [ReplicaID: UInt64]?,
                              withholding: (replica: ReplicaID, above: UInt64)? = nil,
                              crediting: UInt64) throws -> (payload: [UInt8]?, credited: (replica: ReplicaID, count: UInt64)?) {
        projection.indexing = false
        projection.beginBatch(tracking: false)
        defer {
            projection.commitBatch(report: false)
            projection.reset()
            projection.indexing = true
        }
        // The credit pass also counts the upload's new objects, which the header states first.
        var plan = try projection.prepareMerge(from: upload, believingApplied: believingApplied, withholding: withholding,
                                               crediting: crediting, detectingChange: true)
        // The zone checked the upload's named assets, which leave out deleted objects': so their
        // asset fields stay out of the zone too.
        plan.droppingAssetsOfDeleted = true
        let mine = projection.records.keys.sorted()
        var w = ByteWriter(capacity: upload.payload.count + mine.count * 96 + 4096)
        ProjectionCodec.writeHeader(projection, recordCount: mine.count + plan.newRecords, &w)
        var next = 0
        var written = 0
        func writeMine(below id: ObjectID?) {
            while next < mine.count, id.map({ mine[next] < $0 }) ?? true {
                if let record = projection.records[mine[next]] {
                    ProjectionCodec.writeRecord(mine[next], record, &w)
                    written += 1
                }
                next += 1
            }
        }
        try upload.forEachRecord { id, record in
            writeMine(below: id)
            if plan.bringsNothing(record) { return }
            let isNew = !(next < mine.count && mine[next] == id)
            projection.mergeRecord(id, record, plan: &plan)
            if let merged = projection.records[id] {
                ProjectionCodec.writeRecord(id, merged, &w)
                written += 1
            }
            if isNew { projection.dropRecord(id) } else { next += 1 }
        }
        writeMine(below: nil)
        // The header named the count before the objects were merged: a payload whose count
        // disagrees would be a zone snapshot no reader opens, so it is never returned.
        guard written == mine.count + plan.newRecords else {
            throw StoreError(.storeFailed, "internal: the merged state has \(written) objects where \(mine.count + plan.newRecords) were counted; nothing was written")
        }
        return (plan.changed ? w.bytes : nil, plan.outcome(in: projection).credited)
    }

    /// The newest timestamp of any event the state holds, found by looking at every stamp (not
    /// the header's claim): what a server checks against its clock before merging an uploaded
    /// state, since a stamp far ahead would win every later edit.
    public func newestTimestamp() -> HLC {
        var newest = projection.maxHLC
        for (ref, _) in projection.schemaEvents { newest = max(newest, ref.hlc) }
        for record in projection.records.values {
            newest = max(newest, record.inserted.hlc, record.deleted.hlc)
            for slot in record.fields { newest = max(newest, slot.ref.hlc) }
            for member in record.sets {
                for add in member.adds { newest = max(newest, add.hlc) }
            }
        }
        return HLC(rawValue: newest)
    }

    /// The snapshot payload of everything applied so far (the layout of the Strata format article).
    public func snapshotPayload() -> [UInt8] { ProjectionCodec.encode(projection) }

    /// Each replica's highest sequence below which everything has been applied.
    public func contiguousSequences() -> [ReplicaID: UInt64] {
        Dictionary(uniqueKeysWithValues: projection.appliedSummary().map { ($0.replica, $0.contiguous) })
    }

    /// Reads see the schema the events applied so far recorded. Assigned only when it changed:
    /// an assignment drops the projection's read plans, and a read per object (`replay --json`,
    /// `diff`) rebuilt them for every object. (Equal schemas share their storage, so the check
    /// is cheap.)
    private func useRecordedSchema() {
        if projection.schema != projection.recordedSchema { projection.schema = projection.recordedSchema }
    }

    /// The canonical digest (see `Store.digest()`).
    public func digest() -> String {
        useRecordedSchema()
        return projection.digest()
    }

    /// Each existing object's state fingerprint (see ``StateDigests``).
    public func stateDigests() -> StateDigests {
        useRecordedSchema()
        return projection.stateDigests()
    }

    // MARK: Reading

    /// The schema recorded by the events applied so far.
    public var schema: Schema { projection.recordedSchema }

    /// Events applied in all (duplicates not counted).
    public var eventCount: UInt64 { projection.eventCount }

    /// Exactly which events of each replica have been applied, by replica ID.
    public func appliedSequences() -> [AppliedSequences] {
        projection.replicas.enumerated().compactMap { index, replica in
            let set = projection.applied[index]
            return set.isEmpty ? nil : AppliedSequences(replica: replica, contiguous: set.contiguous, above: set.above.sorted())
        }.sorted { $0.replica < $1.replica }
    }

    /// Whether the event has been applied.
    public func hasApplied(_ event: EventID) -> Bool {
        guard let index = projection.replicas.firstIndex(of: event.replica) else { return false }
        return projection.applied[index].contains(event.sequence)
    }

    /// An existing object with its to-many relationships, as a store would read it.
    public func object(_ id: ObjectID) -> ObjectSnapshot? {
        useRecordedSchema()
        return projection.snapshot(id, includeToMany: true)
    }

    /// The existing objects' IDs, sorted.
    public func allObjectIDs() -> [ObjectID] { projection.allObjectIDs() }

    /// The existing objects of `entity`, sorted by ID.
    public func objectIDs(of entity: String) -> [ObjectID] {
        useRecordedSchema()
        return projection.objectIDs(of: entity).sorted()
    }

    /// Which event set each attribute and to-one reference of the object's current incarnation.
    public func provenance(_ id: ObjectID) -> [String: FieldProvenance] { projection.provenance(id) }

    /// What the projection knows of an object, existing or deleted: its entity and the insert and
    /// delete events that decide its existence. `nil` when no event ever named it.
    public func lifecycle(_ id: ObjectID) -> ObjectLifecycle? {
        guard let record = projection.records[id] else { return nil }
        func provenance(_ ref: Ref) -> FieldProvenance? {
            ref.isNone ? nil : FieldProvenance(event: projection.eventID(of: ref), hlc: HLC(rawValue: ref.hlc))
        }
        return ObjectLifecycle(entity: projection.entityName(of: record), exists: projection.exists(record),
                               inserted: provenance(record.inserted), deleted: provenance(record.deleted))
    }

    /// The objects whose visible state can change with `id`'s: those referring to it (by a to-one
    /// reference or a to-many membership, which derived inverse relationships read) and those it
    /// refers to. A superset: the reverse indexes keep entries that no longer hold.
    public func neighbours(of id: ObjectID) -> Set<ObjectID> {
        var result = Set<ObjectID>()
        for referrer in projection.referrers[id] ?? [] { result.insert(referrer.source) }
        for referrer in projection.memberships[id] ?? [] { result.insert(referrer.source) }
        if let record = projection.records[id] {
            for slot in record.fields {
                if case .reference(let target) = slot.value { result.insert(target) }
            }
            for member in record.sets { result.insert(member.target) }
        }
        return result
    }

    /// Every object ID any applied event named, existing or not, sorted.
    public func knownObjectIDs() -> [ObjectID] { projection.records.keys.sorted() }
}

/// Which events of one replica a projection has applied: every sequence up to `contiguous`, and
/// the ones in `above` (events that arrived ahead of a gap).
public struct AppliedSequences: Sendable, Hashable, Codable {
    public var replica: ReplicaID
    public var contiguous: UInt64
    /// Applied sequences beyond `contiguous`, ascending.
    public var above: [UInt64]

    public init(replica: ReplicaID, contiguous: UInt64, above: [UInt64]) {
        self.replica = replica
        self.contiguous = contiguous
        self.above = above
    }

    public var highest: UInt64 { above.last ?? contiguous }
    /// Events applied.
    public var count: UInt64 { contiguous + UInt64(above.count) }

    public func contains(_ sequence: UInt64) -> Bool {
        sequence >= 1 && (sequence <= contiguous || above.contains(sequence))
    }
}

/// An object's entity and the events that decide whether it exists (the newer of its newest
/// insert and newest delete).
public struct ObjectLifecycle: Sendable, Hashable {
    public var entity: String
    public var exists: Bool
    public var inserted: FieldProvenance?
    public var deleted: FieldProvenance?
}
