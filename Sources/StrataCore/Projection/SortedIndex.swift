import Synchronization

/// The key an index keeps for one object: the values of its indexed attributes, in the order
/// the index names them. The first is kept apart so that a one-attribute index allocates
/// nothing per object (an empty array shares one empty storage).
package struct IndexKey: Sendable, Equatable {
    package var first: Value
    package var rest: [Value]

    package init(_ values: [Value]) {
        first = values.first ?? .null
        rest = Array(values.dropFirst())
    }

    package var count: Int { 1 + rest.count }
    package subscript(position: Int) -> Value { position == 0 ? first : rest[position - 1] }

    /// Lexicographic under ``Value/precedes(_:_:)``.
    package static func precedes(_ a: IndexKey, _ b: IndexKey) -> Bool {
        if Value.precedes(a.first, b.first) { return true }
        if Value.precedes(b.first, a.first) { return false }
        for (x, y) in zip(a.rest, b.rest) {
            if Value.precedes(x, y) { return true }
            if Value.precedes(y, x) { return false }
        }
        return a.rest.count < b.rest.count
    }
}

/// One end of a range an index is walked over, per attribute: a value, or the first or last
/// place a kind of value can take (`.less(age, 30)` starts where numbers start, not at null).
package enum IndexBound: Sendable, Equatable {
    case value(Value)
    case kindStart(Int)
    case kindEnd(Int)

    /// -1, 0 or 1: where `value` lies against this bound (0 only for an equivalent value).
    func place(of value: Value) -> Int {
        switch self {
        case .value(let bound): return Value.precedes(value, bound) ? -1 : (Value.precedes(bound, value) ? 1 : 0)
        case .kindStart(let rank): return value.rank < rank ? -1 : 1
        case .kindEnd(let rank): return value.rank <= rank ? -1 : 1
        }
    }

    /// Where `key` lies against a bound on its first `bounds.count` values.
    static func place(of key: IndexKey, against bounds: [IndexBound]) -> Int {
        for (position, bound) in bounds.enumerated() where position < key.count {
            let place = bound.place(of: key[position])
            if place != 0 { return place }
        }
        return 0
    }
}

/// The objects of one entity in the order of their index keys (then IDs): a sorted array cut into
/// chunks of a few hundred entries, so that an insert or a removal moves at most one chunk's
/// entries and a lookup is two binary searches. A copy shares the chunks until it changes one
/// (the store's read views are copies). It does not remember each object's key (that would
/// cost a dictionary entry per object): whoever changes an object says which key it had.
package struct SortedIndex: Sendable {
    package struct Entry: Sendable {
        package var key: IndexKey
        package var id: ObjectID
    }

    private var chunks: [[Entry]] = []
    package private(set) var count = 0
    /// A chunk splits in two beyond this many entries (tests make it small, so that their few
    /// objects split, empty and walk across chunks).
    private static let chunkLimitSetting = Atomic<Int>(512)
    static var chunkLimit: Int { chunkLimitSetting.load(ordering: .relaxed) }
    package static func setChunkLimit(_ limit: Int) { chunkLimitSetting.store(max(2, limit), ordering: .relaxed) }

    package init() {}

    /// Builds the index from unsorted entries at once (an open, a schema change).
    package init(entries: consuming [Entry]) {
        var sorted = entries
        sorted.sort(by: SortedIndex.precedes)
        var chunks: [[Entry]] = []
        chunks.reserveCapacity(sorted.count / max(1, Self.chunkLimit / 2) + 1)
        var start = 0
        let size = max(1, Self.chunkLimit / 2)
        while start < sorted.count {
            let end = min(start + size, sorted.count)
            chunks.append(Array(sorted[start..<end]))
            start = end
        }
        self.chunks = chunks
        count = sorted.count
    }

    static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        if IndexKey.precedes(a.key, b.key) { return true }
        if IndexKey.precedes(b.key, a.key) { return false }
        return a.id < b.id
    }

    /// Moves an object from the key it had (`nil`: not in the index) to its new one (`nil`:
    /// out of the index).
    package mutating func update(_ id: ObjectID, from old: IndexKey?, to new: IndexKey?) {
        if let old, let new, old == new { return }
        if let old, remove(Entry(key: old, id: id)) { count -= 1 }
        if let new {
            insert(Entry(key: new, id: id))
            count += 1
        }
    }

    /// The first chunk whose last entry does not precede `entry` (the last chunk when all do).
    private func chunk(for entry: Entry) -> Int {
        var lo = 0, hi = chunks.count - 1
        while lo < hi {
            let mid = (lo + hi) / 2
            if let last = chunks[mid].last, SortedIndex.precedes(last, entry) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private static func position(of entry: Entry, in chunk: [Entry]) -> Int {
        var lo = 0, hi = chunk.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if precedes(chunk[mid], entry) { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private mutating func insert(_ entry: Entry) {
        if chunks.isEmpty {
            chunks = [[entry]]
            return
        }
        let c = chunk(for: entry)
        let p = Self.position(of: entry, in: chunks[c])
        chunks[c].insert(entry, at: p)
        let limit = Self.chunkLimit
        if chunks[c].count > limit {
            let upper = Array(chunks[c][(limit / 2)...])
            chunks[c].removeSubrange((limit / 2)...)
            chunks.insert(upper, at: c + 1)
        }
    }

    private mutating func remove(_ entry: Entry) -> Bool {
        guard !chunks.isEmpty else { return false }
        let c = chunk(for: entry)
        let p = Self.position(of: entry, in: chunks[c])
        guard p < chunks[c].count, chunks[c][p].id == entry.id else { return false }
        chunks[c].remove(at: p)
        if chunks[c].isEmpty { chunks.remove(at: c) }
        return true
    }

    /// Calls `body` with every entry whose key lies within `lower...upper` (bounds on the key's
    /// first values; an empty bound is open), in key order, or in reverse; stops when `body`
    /// returns `false`.
    package func walk(from lower: [IndexBound], to upper: [IndexBound], reverse: Bool = false, _ body: (Entry) -> Bool) {
        if reverse {
            var c = chunks.count - 1
            // The last chunk whose first entry is not above `upper`.
            while c >= 0, let first = chunks[c].first, IndexBound.place(of: first.key, against: upper) > 0 { c -= 1 }
            while c >= 0 {
                for entry in chunks[c].reversed() {
                    if IndexBound.place(of: entry.key, against: upper) > 0 { continue }
                    if IndexBound.place(of: entry.key, against: lower) < 0 { return }
                    if !body(entry) { return }
                }
                c -= 1
            }
            return
        }
        // The first chunk whose last entry is not below `lower`.
        var lo = 0, hi = chunks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if let last = chunks[mid].last, IndexBound.place(of: last.key, against: lower) < 0 { lo = mid + 1 } else { hi = mid }
        }
        var c = lo
        while c < chunks.count {
            let chunk = chunks[c]
            var p = 0
            if c == lo {
                var a = 0, b = chunk.count
                while a < b {
                    let mid = (a + b) / 2
                    if IndexBound.place(of: chunk[mid].key, against: lower) < 0 { a = mid + 1 } else { b = mid }
                }
                p = a
            }
            while p < chunk.count {
                let entry = chunk[p]
                if IndexBound.place(of: entry.key, against: upper) > 0 { return }
                if !body(entry) { return }
                p += 1
            }
            c += 1
        }
    }
}
