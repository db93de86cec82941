extension ProjectionBuilder {
    /// What merging this state (side A) with `other` (side B) would produce, and why (see
    /// ``MergePreview``). Neither builder is changed.
    ///
    /// Visits every object either side holds: about a second per million objects.
    ///
    /// - Throws: ``StoreError`` when the two cannot be merged (more replicas than a projection
    ///   holds, say).
    public func previewMerge(with other: ProjectionBuilder) throws -> MergePreview {
        let merged = ProjectionBuilder()
        merged.projection.beginBatch(tracking: false)
        do {
            try merged.projection.merge(from: projection)
            try merged.projection.merge(from: other.projection)
        } catch {
            merged.projection.commitBatch(report: false)
            throw error
        }
        merged.projection.commitBatch(report: false)
        var preview = MergePreview(merged: merged)
        // Every object either side can see (an object neither sees is the same on both).
        let ids = Set(allObjectIDs()).union(other.allObjectIDs()).sorted()
        for id in ids {
            if let outcome = MergePreview.outcome(of: id, a: self, b: other, merged: merged) { preview.objects.append(outcome) }
        }
        return preview
    }
}

extension MergePreview {
    /// Why the merge order (HLC, then replica ID, then sequence) put `x` above `y`.
    static func reason(newer x: FieldProvenance, than y: FieldProvenance) -> Reason {
        if x.hlc != y.hlc { return .laterWrite }
        if x.event.replica != y.event.replica { return .clockTieBrokenByReplica }
        return .clockTieBrokenBySequence
    }

    static func isNewer(_ x: FieldProvenance, than y: FieldProvenance) -> Bool {
        (x.hlc.rawValue, x.event.replica, x.event.sequence) > (y.hlc.rawValue, y.event.replica, y.event.sequence)
    }

    static func side(of event: FieldProvenance?, a: FieldProvenance?, b: FieldProvenance?) -> Side {
        guard let event else { return .neither }
        return event == a ? .a : event == b ? .b : .neither
    }

    /// The object's outcome, or `nil` when both sides read it the same (local-only attributes
    /// aside).
    static func outcome(of id: ObjectID, a: ProjectionBuilder, b: ProjectionBuilder, merged: ProjectionBuilder) -> ObjectOutcome? {
        let objectA = a.object(id)
        let objectB = b.object(id)
        let objectM = merged.object(id)
        let entity = objectM?.entity ?? objectA?.entity ?? objectB?.entity ?? merged.lifecycle(id)?.entity ?? "?"
        // Local-only attributes never sync: each device keeps its own, by design.
        let localOnly = Set([a.schema, b.schema].flatMap { ($0.entity(entity)?.attributes ?? []).filter(\.isLocalOnly).map(\.name) })
        var outcome = ObjectOutcome(object: id, entity: entity, existence: nil, fields: [], members: [])

        if (objectA == nil) != (objectB == nil) {
            // On one side only: whether it exists decides everything (its fields go with it).
            outcome.existence = existence(of: id, a: a, b: b, merged: merged)
        } else if let objectA, let objectB {
            let provenanceA = a.provenance(id)
            let provenanceB = b.provenance(id)
            let provenanceM = merged.provenance(id)
            for key in Set(objectA.values.keys).union(objectB.values.keys).sorted() where !localOnly.contains(key) {
                guard objectA.values[key] != objectB.values[key] else { continue }
                outcome.fields.append(field(key, objectA, objectB, objectM, provenanceA[key], provenanceB[key], provenanceM[key]))
            }
            for relationship in Set(objectA.toMany.keys).union(objectB.toMany.keys).sorted() {
                let membersA = Set(objectA.toMany[relationship] ?? [])
                let membersB = Set(objectB.toMany[relationship] ?? [])
                let membersM = Set(objectM?.toMany[relationship] ?? [])
                for target in membersA.symmetricDifference(membersB).sorted() {
                    let inMerged = membersM.contains(target)
                    let holder: Side = membersA.contains(target) ? .a : .b
                    let reason: Reason
                    if !inMerged {
                        reason = merged.object(target) == nil ? .targetDeleted : .removalCoversEveryAdd
                    } else {
                        // The side without it: did it remove it (add wins), or never add it?
                        let lacking = holder == .a ? b : a
                        reason = lacking.hasRemoval(of: target, in: relationship, of: id) ? .addWinsOverConcurrentRemove : .onlyOneSideWrote
                    }
                    outcome.members.append(MemberOutcome(relationship: relationship, target: target, a: holder == .a, b: holder == .b,
                                                         merged: inMerged, from: inMerged ? holder : (holder == .a ? .b : .a), reason: reason))
                }
            }
        }
        guard outcome.existence != nil || !outcome.fields.isEmpty || !outcome.members.isEmpty else { return nil }
        return outcome
    }

    private static func field(_ key: String, _ objectA: ObjectSnapshot, _ objectB: ObjectSnapshot, _ objectM: ObjectSnapshot?,
                              _ eventA: FieldProvenance?, _ eventB: FieldProvenance?, _ eventM: FieldProvenance?) -> FieldOutcome {
        let valueM = objectM?.values[key]
        var from = side(of: eventM, a: eventA, b: eventB)
        var reason: Reason
        switch (eventA, eventB) {
        case let (x?, y?) where x == y:
            reason = .sameWrite
            from = objectA.values[key] == valueM ? .a : (objectB.values[key] == valueM ? .b : .neither)
        case let (x?, y?):
            reason = from == .neither ? .hiddenByNewerInsert : (isNewer(x, than: y) ? Self.reason(newer: x, than: y) : Self.reason(newer: y, than: x))
        case (_?, nil), (nil, _?):
            reason = from == .neither ? .hiddenByNewerInsert : .onlyOneSideWrote
        case (nil, nil):
            // Neither side's value was written by an event of this incarnation.
            reason = .notWritten
            from = objectA.values[key] == valueM ? .a : (objectB.values[key] == valueM ? .b : .neither)
        }
        if from == .neither {
            from = objectA.values[key] == valueM ? .a : (objectB.values[key] == valueM ? .b : .neither)
        }
        // The write that decided refers to an object the merge deletes (a side deleted it).
        if valueM == .null, let decided = eventM, decided == eventA || decided == eventB,
           [objectA.values[key], objectB.values[key]].contains(where: { $0?.referenceValue != nil }) {
            reason = .referenceToDeletedObject
        }
        return FieldOutcome(name: key, a: objectA.values[key], b: objectB.values[key], merged: valueM, from: from, reason: reason,
                            eventA: eventA, eventB: eventB, mergedEvent: eventM)
    }

    private static func existence(of id: ObjectID, a: ProjectionBuilder, b: ProjectionBuilder, merged: ProjectionBuilder) -> ExistenceOutcome {
        let lifeA = a.lifecycle(id)
        let lifeB = b.lifecycle(id)
        let lifeM = merged.lifecycle(id)
        let existsA = lifeA?.exists ?? false
        let existsB = lifeB?.exists ?? false
        let existsM = lifeM?.exists ?? false
        let decider = existsM ? lifeM?.inserted : lifeM?.deleted
        let from: Side = existsA == existsM ? .a : .b
        let reason: Reason
        if lifeA == nil || lifeB == nil {
            reason = .onlyOneSideHasObject
        } else {
            reason = existsM ? .insertNewerThanDelete : .deleteNewerThanInsert
        }
        return ExistenceOutcome(a: existsA, b: existsB, merged: existsM, from: from, reason: reason, decidedBy: decider)
    }
}

extension ProjectionBuilder {
    /// A copy of `projection`'s whole state (the join of it into an empty one).
    package static func copy(of projection: Projection) throws -> ProjectionBuilder {
        let copy = ProjectionBuilder()
        copy.projection.beginBatch(tracking: false)
        defer { copy.projection.commitBatch(report: false) }
        try copy.projection.merge(from: projection)
        return copy
    }

    /// Whether this state holds a removal of `target` from `relationship` of `id` (a remove that
    /// named some add of it).
    func hasRemoval(of target: ObjectID, in relationship: String, of id: ObjectID) -> Bool {
        guard let record = projection.records[id], let key = projection.nameID(relationship) else { return false }
        let (found, index) = record.setIndex(key, target)
        return found && !record.sets[index].removedAdds.isEmpty
    }
}
