import Strata
import StrataCore

/// Where each transaction of a store's log lies: its position, stored time, author and sequences.
/// About 40 bytes a transaction, so a million-event history indexes in a few tens of MB; it lets
/// the tools say where in a device's log an event arrived ("blame" with a position).
struct EntryIndex: Sendable {
    struct Entry: Sendable, Hashable {
        var position: UInt64
        var timestamp: Int64
        var replica: UInt32
        var firstSequence: UInt64
        var count: UInt64
        var baseHLC: UInt64
        /// The record holding it: its segment file (an index into `segments`) and byte offset.
        var segment: UInt32
        var recordOffset: Int64
    }

    private(set) var entries: [Entry] = []
    private(set) var replicas: [ReplicaID] = []
    private(set) var segments: [String] = []
    private var replicaIndex: [ReplicaID: UInt32] = [:]
    /// Per replica, indexes into `entries` sorted by first sequence (built on first lookup).
    private var byReplica: [[Int]]?

    mutating func add(position: UInt64, timestamp: Int64, header: TransactionHeader, segment: String = "", recordOffset: Int64 = 0) {
        if segments.last != segment { segments.append(segment) }
        let replica: UInt32
        if let known = replicaIndex[header.replica] {
            replica = known
        } else {
            replica = UInt32(replicas.count)
            replicaIndex[header.replica] = replica
            replicas.append(header.replica)
        }
        entries.append(Entry(position: position, timestamp: timestamp, replica: replica, firstSequence: header.firstSequence,
                             count: header.eventCount, baseHLC: header.baseHLC.rawValue,
                             segment: UInt32(segments.count - 1), recordOffset: recordOffset))
        byReplica = nil
    }

    func replica(of entry: Entry) -> ReplicaID { replicas[Int(entry.replica)] }

    func segment(of entry: Entry) -> String { segments[Int(entry.segment)] }

    /// The first entry that holds `event`, if this log has it.
    mutating func entry(holding event: EventID) -> Entry? {
        guard let replica = replicaIndex[event.replica] else { return nil }
        if byReplica == nil {
            var lists = [[Int]](repeating: [], count: replicas.count)
            for (i, entry) in entries.enumerated() { lists[Int(entry.replica)].append(i) }
            for r in lists.indices { lists[r].sort { entries[$0].firstSequence < entries[$1].firstSequence } }
            byReplica = lists
        }
        guard let list = byReplica?[Int(replica)] else { return nil }
        // The last entry starting at or before the sequence.
        var lo = 0
        var hi = list.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[list[mid]].firstSequence <= event.sequence { lo = mid + 1 } else { hi = mid }
        }
        var i = lo - 1
        while i >= 0 {
            let entry = entries[list[i]]
            if event.sequence < entry.firstSequence + entry.count { return entry }
            // An earlier, longer transaction cannot cover it: a replica's transactions do not overlap.
            if entry.firstSequence + entry.count <= event.sequence { return nil }
            i -= 1
        }
        return nil
    }
}
