#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Strata

/// What `strata inspect` reports: the log's segments and sizes, the events by kind and entity,
/// the replicas and their sequences, snapshots, sync cursors and schema.
struct Inspection: Codable, Sendable {
    struct Segment: Codable, Sendable {
        var name: String
        var firstPosition: UInt64
        var endPosition: UInt64
        var records: Int
        var bytes: Int64
        var indexOK: Bool
    }
    struct Replica: Codable, Sendable {
        var replica: String
        var isThisStore: Bool
        /// Events of this replica in the log (not counting a snapshot).
        var eventsInLog: Int
        var lowestSequenceInLog: UInt64?
        var highestSequenceInLog: UInt64?
        /// What the store has applied of it (snapshot included).
        var appliedContiguous: UInt64
        var appliedHighest: UInt64
        var appliedCount: UInt64
    }
    struct SnapshotFile: Codable, Sendable {
        var name: String
        var position: UInt64
        var problem: String?
    }
    struct Cursor: Codable, Sendable {
        var zone: String
        var token: String?
        var acknowledged: UInt64
    }
    struct EntitySchema: Codable, Sendable {
        var name: String
        var attributes: [String]
        var relationships: [String]
    }

    var store: String
    var replica: String
    var startPosition: UInt64
    var endPosition: UInt64
    var records: Int
    var transactions: Int
    var events: Int
    var storedBytes: Int64
    var payloadBytes: Int64
    /// Stored bytes over uncompressed payload bytes (smaller is better).
    var compressionRatio: Double
    var segments: [Segment]
    var eventsByKind: [String: Int]
    var eventsByEntity: [String: Int]
    var replicas: [Replica]
    var snapshots: [SnapshotFile]
    var objects: Int
    var objectsByEntity: [String: Int]
    var digest: String
    var syncCursors: [Cursor]
    var schema: [EntitySchema]
    var problems: [String]
    var tornTail: String?

    /// Reads the whole store once.
    static func run(_ files: StoreFiles, progress: Progress?) throws -> Inspection {
        var byKind: [String: Int] = [:]
        var byEntity: [String: Int] = [:]
        var perReplica: [ReplicaID: (count: Int, low: UInt64, high: UInt64)] = [:]
        var segmentRecords: [String: (first: UInt64, end: UInt64, records: Int, lastOffset: Int64)] = [:]
        var transactions = 0
        var events = 0
        // One pass: the projection (from the newest snapshot) and every event of the log decoded.
        let loaded = try LoadedStore.load(files, start: .newest, progress: progress) { entry, _, _ in
            transactions += 1
            let record: TransactionRecord
            do {
                record = try TransactionRecord(decoding: entry.payload)
            } catch {
                throw CLIError("\(files.directory): position \(entry.position): \(error)", exitCode: ExitStatus.finding)
            }
            events += record.events.count
            for event in record.events {
                byKind[event.change.kind, default: 0] += 1
                if let entity = event.change.entity { byEntity[entity, default: 0] += 1 }
            }
            if let sequences = record.sequences {
                var stats = perReplica[record.replica] ?? (0, .max, 0)
                stats.count += record.events.count
                stats.low = min(stats.low, sequences.lowerBound)
                stats.high = max(stats.high, sequences.upperBound)
                perReplica[record.replica] = stats
            }
            var segment = segmentRecords[entry.segment] ?? (entry.position, entry.position, 0, -1)
            if segment.lastOffset != entry.recordOffset {
                segment.records += 1
                segment.lastOffset = entry.recordOffset
            }
            segment.end = entry.position + 1
            segmentRecords[entry.segment] = segment
        }
        let report = loaded.report
        let projection = loaded.projection
        let applied = projection.appliedSequences()
        var replicaIDs = Set(applied.map(\.replica))
        replicaIDs.formUnion(perReplica.keys)
        let replicas = replicaIDs.sorted().map { id -> Replica in
            let inLog = perReplica[id]
            let set = applied.first { $0.replica == id }
            return Replica(replica: id.description, isThisStore: id == files.replicaID, eventsInLog: inLog?.count ?? 0,
                           lowestSequenceInLog: inLog?.low, highestSequenceInLog: inLog?.high,
                           appliedContiguous: set?.contiguous ?? 0, appliedHighest: set?.highest ?? 0, appliedCount: set?.count ?? 0)
        }
        let segmentNames = segmentRecords.keys.sorted()
        let segments = segmentNames.compactMap { name -> Segment? in
            guard let stats = segmentRecords[name] else { return nil }
            let size = FileSize.of(files.logDirectory + "/" + name)
            return Segment(name: name, firstPosition: stats.first, endPosition: stats.end, records: stats.records, bytes: size,
                           indexOK: !report.staleIndexes.contains(name))
        }
        var objectsByEntity: [String: Int] = [:]
        let ids = projection.allObjectIDs()
        for id in ids {
            if let entity = projection.lifecycle(id)?.entity { objectsByEntity[entity, default: 0] += 1 }
        }
        let schema = projection.schema.entities.map { entity in
            EntitySchema(name: entity.name,
                         attributes: entity.attributes.map { "\($0.name): \($0.type.rawValue)\($0.isOptional ? "?" : "")\($0.isLocalOnly ? " (local only)" : "")" },
                         relationships: entity.relationships.map { "\($0.name) → \($0.isToMany ? "[\($0.destination)]" : $0.destination)\($0.inverse.map { " (inverse \($0))" } ?? "") \($0.deleteRule.rawValue)" })
        }
        return Inspection(
            store: files.directory, replica: files.replicaID.description,
            startPosition: report.startPosition ?? 0, endPosition: report.endPosition ?? report.startPosition ?? 0,
            records: report.records, transactions: transactions, events: events,
            storedBytes: report.storedBytes, payloadBytes: report.payloadBytes,
            compressionRatio: report.payloadBytes > 0 ? Double(report.storedBytes) / Double(report.payloadBytes) : 0,
            segments: segments, eventsByKind: byKind, eventsByEntity: byEntity, replicas: replicas,
            snapshots: report.snapshots.map { SnapshotFile(name: $0.info.name, position: $0.info.position, problem: $0.problem.map { "\($0)" }) },
            objects: ids.count, objectsByEntity: objectsByEntity, digest: projection.digest(),
            syncCursors: files.syncCursors().map { Cursor(zone: $0.zone, token: $0.token, acknowledged: $0.acknowledged) },
            schema: schema, problems: report.problems.map { "\($0)" } + loaded.notes,
            tornTail: report.tornTail.map { "\($0.segment) at byte \($0.offset): \($0.reason) (\($0.droppedBytes) bytes; truncated when the store next opens)" })
    }

    var text: String {
        var lines: [String] = []
        lines.append("store     \(store)")
        lines.append("replica   \(replica)")
        lines.append("log       positions \(startPosition)..<\(endPosition): \(records) records, \(transactions) transactions, \(events) events")
        lines.append("size      \(Format.bytes(storedBytes)) on disk for \(Format.bytes(payloadBytes)) of events (compression ratio \(String(format: "%.2f", compressionRatio)))")
        lines.append("")
        lines.append("segments")
        for s in segments {
            lines.append("  \(s.name)  positions \(s.firstPosition)..<\(s.endPosition)  \(Format.right(String(s.records), 6)) records  \(Format.right(Format.bytes(s.bytes), 10))\(s.indexOK ? "" : "  (index stale: rebuilt on open)")")
        }
        if segments.isEmpty { lines.append("  (no records)") }
        lines.append("snapshots")
        for s in snapshots { lines.append("  \(s.name)  position \(s.position)  \(s.problem.map { "DAMAGED: \($0)" } ?? "ok")") }
        if snapshots.isEmpty { lines.append("  (none)") }
        lines.append("")
        lines.append("events by kind    " + eventsByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        lines.append("events by entity  " + eventsByEntity.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        lines.append("objects           \(objects): " + objectsByEntity.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        lines.append("digest            \(digest)")
        lines.append("")
        lines.append("replicas")
        for r in replicas {
            let inLog = r.eventsInLog > 0 ? "log has \(r.eventsInLog) events, sequences \(r.lowestSequenceInLog ?? 0)…\(r.highestSequenceInLog ?? 0)" : "no events in the log"
            let gap = r.appliedHighest > r.appliedContiguous ? ", highest \(r.appliedHighest) (gap after \(r.appliedContiguous))" : ""
            lines.append("  \(r.replica)\(r.isThisStore ? " (this store)" : "")  applied \(r.appliedCount): 1…\(r.appliedContiguous)\(gap); \(inLog)")
        }
        lines.append("sync")
        for c in syncCursors { lines.append("  zone \(c.zone): token \(c.token ?? "(none)"), own sequences acknowledged up to \(c.acknowledged)") }
        if syncCursors.isEmpty { lines.append("  (never synced)") }
        lines.append("schema")
        for e in schema {
            lines.append("  \(e.name)")
            for a in e.attributes { lines.append("    \(a)") }
            for r in e.relationships { lines.append("    \(r)") }
        }
        if let tornTail { lines.append("torn tail: \(tornTail)") }
        for p in problems { lines.append("PROBLEM: \(p)") }
        return lines.joined(separator: "\n")
    }
}

enum FileSize {
    static func of(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }
}
