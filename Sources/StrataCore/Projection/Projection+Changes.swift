/// One object's change in a commit, as an observer sees it.
public struct ObjectChange: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case inserted, updated, deleted
    }

    public var id: ObjectID
    public var entity: String
    public var kind: Kind
    /// For updates: the attributes and relationships whose visible value changed.
    public var keys: Set<String>

    package init(id: ObjectID, entity: String, kind: Kind, keys: Set<String>) {
        (self.id, self.entity, self.kind, self.keys) = (id, entity, kind, keys)
    }
}

/// The changes of one committed transaction (or batch of remote transactions), delivered to
/// observers in commit order, exactly once.
public struct ChangeSet: Sendable, Hashable {
    public enum Origin: Sendable, Hashable {
        /// Committed by this process.
        case local
        /// Pulled by sync: other devices' transactions.
        case remote
        /// Committed (or pulled) by another process sharing the store (`StoreSharing.processes`):
        /// an app's widget or extension, or the app seen from them.
        case otherProcess
    }

    public var origin: Origin
    /// The log positions the commit occupies.
    public var positions: Range<UInt64>
    public var changes: [ObjectChange]
    /// Whether the commit changed the schema in effect: another app version's schema, pulled by
    /// sync, was merged into it. Objects the commit did not change may then read differently
    /// (an attribute they lack now reads as its new default), so observed queries evaluate again.
    public var schemaChanged = false

    package init(origin: Origin, positions: Range<UInt64>, changes: [ObjectChange], schemaChanged: Bool = false) {
        (self.origin, self.positions, self.changes, self.schemaChanged) = (origin, positions, changes, schemaChanged)
    }

    public var inserted: [ObjectChange] { changes.filter { $0.kind == .inserted } }
    public var updated: [ObjectChange] { changes.filter { $0.kind == .updated } }
    public var deleted: [ObjectChange] { changes.filter { $0.kind == .deleted } }
}

extension Projection {
    /// What changed for readers between two versions of a record, and the objects on the other
    /// side of changed relationships (whose inverse reads changed too).
    package func describeChange(id: ObjectID, old: ObjectRecord?, new: ObjectRecord?) -> (change: ObjectChange, inverse: [(ObjectID, String)])? {
        let before = old.map(exists) ?? false
        let after = new.map(exists) ?? false
        guard before || after, let record = new ?? old else { return nil }
        let entity = entityName(of: record)
        var keys = Set<String>()
        var inverse: [(ObjectID, String)] = []
        func note(_ key: UInt32, _ targets: [ObjectID]) {
            let name = names[Int(key)]
            guard let relationship = schema.entity(entity)?.relationship(name), let inverseName = relationship.inverse else { return }
            for target in targets { inverse.append((target, inverseName)) }
        }
        let fieldKeys = Set((old?.fields ?? []).map(\.key)).union((new?.fields ?? []).map(\.key))
        for key in fieldKeys {
            let a = before ? old.flatMap { visibleValue($0, key: key)?.value } ?? .null : .null
            let b = after ? new.flatMap { visibleValue($0, key: key)?.value } ?? .null : .null
            if a != b {
                keys.insert(names[Int(key)])
                note(key, [a.referenceValue, b.referenceValue].compactMap { $0 })
            }
        }
        let setKeys = Set((old?.sets ?? []).map(\.key)).union((new?.sets ?? []).map(\.key))
        for key in setKeys {
            let a = before ? old.map { visibleMembers($0, key: key) } ?? [] : []
            let b = after ? new.map { visibleMembers($0, key: key) } ?? [] : []
            if a != b {
                keys.insert(names[Int(key)])
                note(key, Array(Set(a).symmetricDifference(b)))
            }
        }
        let kind: ObjectChange.Kind = before ? (after ? .updated : .deleted) : .inserted
        if kind == .updated && keys.isEmpty { return nil }
        return (ObjectChange(id: id, entity: entity, kind: kind, keys: kind == .updated ? keys : []), inverse)
    }

    /// Adds the inverse sides' updates to a commit's changes (merging keys into existing updates).
    package func merge(_ changes: [ObjectChange], inverse: [(ObjectID, String)]) -> [ObjectChange] {
        var result = changes
        var index = Dictionary(uniqueKeysWithValues: changes.enumerated().map { ($1.id, $0) })
        for (target, key) in inverse {
            guard let record = existing(target) else { continue }
            if let i = index[target] {
                if result[i].kind == .updated { result[i].keys.insert(key) }
            } else {
                index[target] = result.count
                result.append(ObjectChange(id: target, entity: entityName(of: record), kind: .updated, keys: [key]))
            }
        }
        result.sort { $0.id < $1.id }
        // Observers are the app's: they see its names.
        if let view {
            for i in result.indices {
                let stored = result[i].entity
                result[i].entity = view.appEntity(stored)
                result[i].keys = view.appKeys(result[i].keys, in: stored)
            }
        }
        return result
    }
}
