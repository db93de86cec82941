import StrataLog

/// A side's state by object: each existing object's fingerprint, sorted by ID, with prefix sums,
/// so that the digest of any range of object IDs costs two binary searches (56 bytes an object).
///
/// An object's fingerprint covers the object as a store reads it, which is what `strata diff`
/// compares: its ID, its entity, its fields' values (absent attributes at their defaults,
/// derived to-one relationships included; local-only attributes left out: they never sync) and
/// its to-many relationships' members (derived ones included). Not which event set a field: two
/// devices that hold the same values from different events hold the same state (their histories
/// differ, and the history digests say so). Objects that do not exist (deleted, never seen) have
/// no fingerprint: a range's digest counts the existing objects in it.
public struct StateDigests: Sendable {
    /// Sorted, each once.
    public private(set) var ids: [ObjectID] = []
    private var prints: [Fingerprint] = []
    /// `prefix[i]`: the digest of the first `i` objects.
    private var prefix: [DigestSum] = [.zero]

    /// From `(id, fingerprint)` pairs in any order; an ID given twice keeps its first.
    public init(_ objects: [ObjectFingerprint]) {
        // A projection gives them sorted, each once: then there is nothing to sort.
        let ordered = zip(objects, objects.dropFirst()).allSatisfy { $0.id < $1.id }
        let sorted = ordered ? objects : objects.enumerated().sorted { ($0.element.id, $0.offset) < ($1.element.id, $1.offset) }.map(\.element)
        ids.reserveCapacity(sorted.count)
        prints.reserveCapacity(sorted.count)
        prefix.reserveCapacity(sorted.count + 1)
        var sum = DigestSum.zero
        for object in sorted {
            if let last = ids.last, last == object.id { continue }
            ids.append(object.id)
            prints.append(object.fingerprint)
            sum.add(object.fingerprint)
            prefix.append(sum)
        }
    }

    public var count: Int { ids.count }

    /// The digest of the objects whose IDs are in `range`.
    public func digest(_ range: ClosedRange<ObjectID>) -> DigestSum {
        let (low, high) = bounds(range)
        return prefix[high] - prefix[low]
    }

    /// The objects in `range` with their fingerprints, in ID order.
    public func fingerprints(in range: ClosedRange<ObjectID>) -> [ObjectFingerprint] {
        let (low, high) = bounds(range)
        return (low..<high).map { ObjectFingerprint(id: ids[$0], fingerprint: prints[$0]) }
    }

    /// How many objects `range` holds.
    public func count(in range: ClosedRange<ObjectID>) -> Int {
        let (low, high) = bounds(range)
        return high - low
    }

    /// The IDs in `range`, in order.
    public func ids(in range: ClosedRange<ObjectID>) -> ArraySlice<ObjectID> {
        let (low, high) = bounds(range)
        return ids[low..<high]
    }

    /// The index of the first object in `range` and the one after its last.
    private func bounds(_ range: ClosedRange<ObjectID>) -> (Int, Int) {
        let low = firstIndex(notBelow: range.lowerBound)
        var high = firstIndex(notBelow: range.upperBound)
        if high < ids.count, ids[high] == range.upperBound { high += 1 }
        return (low, max(low, high))
    }

    private func firstIndex(notBelow id: ObjectID) -> Int {
        ids.partitionIndex { $0 >= id }
    }
}

/// One object's ID and the fingerprint of its state (see ``StateDigests``).
public struct ObjectFingerprint: Hashable, Sendable {
    public var id: ObjectID
    public var fingerprint: Fingerprint

    public init(id: ObjectID, fingerprint: Fingerprint) {
        self.id = id
        self.fingerprint = fingerprint
    }
}

extension Projection {
    /// Every existing object's state fingerprint (see ``StateDigests``): of the object as a
    /// store reads it (``snapshot(_:includeToMany:)``: absent attributes at their defaults, derived
    /// relationships included), so that two sides differ exactly where `strata diff` finds an
    /// object differing. Local-only attributes of the schema are left out.
    package func stateDigests() -> StateDigests {
        var localOnly: [String: Set<String>] = [:]
        var objects: [ObjectFingerprint] = []
        var w = ByteWriter(capacity: 1024)
        // In ID order, each record read where it is (no lookup by ID per object), from a local
        // copy of the table (see `digest()`).
        let records = self.records
        records.forEachInIDOrder(where: exists) { id, record in
            let object = snapshot(of: record, id: id, includeToMany: true)
            let hidden: Set<String>
            if let known = localOnly[object.entity] {
                hidden = known
            } else {
                hidden = Set((schema.entity(object.entity)?.attributes ?? []).filter(\.isLocalOnly).map(\.name))
                localOnly[object.entity] = hidden
            }
            w.bytes.removeAll(keepingCapacity: true)
            w.id(id)
            w.lengthPrefixed(Array(object.entity.utf8))
            let fields = object.values.filter { !hidden.contains($0.key) }
                .sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            w.varint(UInt64(fields.count))
            for (name, value) in fields {
                w.lengthPrefixed(Array(name.utf8))
                EventCodec.writeValue(value, into: &w)
            }
            let sets = object.toMany.filter { !$0.value.isEmpty }.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for (name, members) in sets {
                let unique = Set(members).sorted()
                w.lengthPrefixed(Array(name.utf8))
                w.varint(UInt64(unique.count))
                for member in unique { w.id(member) }
            }
            objects.append(ObjectFingerprint(id: id, fingerprint: Fingerprint(of: w.bytes)))
        }
        return StateDigests(objects)
    }
}
