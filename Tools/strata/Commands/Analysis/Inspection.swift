import Foundation
@_spi(StrataInternals) import Strata
import StrataLog
import StrataCore

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
        /// Who pushed its events, when the store knows it (`authors.json`).
        var user: String?
        var isThisStore: Bool
        /// Events of this replica in the log.
        var eventsInLog: Int
        /// The sequences the store holds of it — in the log, or folded into the snapshot the log
        /// continues — as ranges (a gap shows events that arrived out of order or not yet).
        var sequences: String
        var count: UInt64
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
    /// Replica → user, as the store recorded it from the log server, with what it holds of each.
    var authors: [Author]
    /// Why no users are shown, when `authors.json` is damaged.
    var authorsWarning: String?
    /// The replicas the store stopped authoring under (forks, a lost log, a re-stamp), oldest first.
    var lineage: [Fork]
    var snapshots: [SnapshotFile]
    /// With `--objects` only (it needs a replay): the objects, by entity, and the digest.
    var objects: Int?
    var objectsByEntity: [String: Int]?
    var digest: String?
    var syncCursors: [Cursor]
    var schema: [EntitySchema]
    var problems: [String]
    /// The states the store adopted from a zone, where (see `strata log --kind adopt`).
    var adoptions: [String] = []
    var tornTail: String?
    /// Assets held, named but remote-only, partly downloaded and pinned; `nil` when the schema has
    /// no asset attribute and the store holds none.
    var assets: AssetSummary? = nil

    /// Reads the whole log once, decoding every event without applying it (a summary needs no
    /// projection). A snapshot is read only when the log no longer holds the history it folds in
    /// (what the store has of each replica is then partly in it); `objects` adds a replay from
    /// the newest snapshot for the object counts and the digest.
    static func run(_ files: StoreFiles, objects wantObjects: Bool = false, progress: Progress?) throws -> Inspection {
        var tally = EventTally()
        var perReplica: [ReplicaID: ReplicaInLog] = [:]
        var segmentRecords: [String: (first: UInt64, end: UInt64, records: Int, lastOffset: Int64)] = [:]
        let identity = try files.identity()
        var notes: [String] = []
        // The snapshot the retained log continues, when history was retired.
        var base: ProjectionBuilder?
        if identity.startPosition > 0 {
            for info in identity.snapshots where info.position >= identity.startPosition {
                do {
                    base = try ProjectionBuilder(snapshot: SegmentLog.readSnapshot(info, logID: identity.logID).payload)
                    break
                } catch {
                    notes.append("skipped the damaged snapshot \(info.name): \(error)")
                }
            }
        }
        var adopted: [(UInt64, AdoptionRecord)] = []
        var adoptionLines: [String] = []
        let report = try files.scan(progress: progress) { entry in
            let header: TransactionHeader
            do {
                header = try tally.add(encoded: entry.payload, position: entry.position)
                if header.isAdoption { adopted.append((entry.position, try AdoptionRecord(decoding: entry.payload, position: entry.position))) }
            } catch {
                throw CLIError("\(files.name): \(error) (record at byte \(entry.recordOffset) of \(entry.segment))", exitCode: ExitStatus.finding)
            }
            if header.eventCount > 0 {
                perReplica[header.replica, default: ReplicaInLog()].add(header.firstSequence...(header.firstSequence + header.eventCount - 1))
            }
            var segment = segmentRecords[entry.segment] ?? (entry.position, entry.position, 0, -1)
            if segment.lastOffset != entry.recordOffset {
                segment.records += 1
                segment.lastOffset = entry.recordOffset
            }
            segment.end = entry.position + 1
            segmentRecords[entry.segment] = segment
        }
        var schema = base?.schema ?? .empty
        for recorded in tally.schemas { schema = schema.merged(with: recorded) }
        // What the store holds: the log's events, the base snapshot's, and those of every state
        // it adopted (their events are not in its log).
        var held: [ReplicaID: [ClosedRange<UInt64>]] = [:]
        for applied in base?.appliedSequences() ?? [] { held[applied.replica, default: []] += SequenceRanges(applied).ranges }
        for (position, record) in adopted {
            adoptionLines.append("position \(position): \(record.origin) (state \(record.stateDigest.prefix(16)), \(record.size) bytes)")
            guard let payload = try? AdoptedStates(storeDirectory: files.directory).payload(for: record, position: position),
                  let state = try? ProjectionBuilder(snapshot: payload) else {
                notes.append("the state adopted at position \(position) is missing or damaged (run `strata verify`)")
                continue
            }
            for applied in state.appliedSequences() { held[applied.replica, default: []] += SequenceRanges(applied).ranges }
            schema = schema.merged(with: state.schema)
        }
        let replicaIDs = Set(held.keys).union(perReplica.keys).sorted()
        let known = Authors(ofStoreAt: files.directory)
        let replicas = replicaIDs.map { id -> Replica in
            let inLog = perReplica[id]
            let held = SequenceRanges(unsorted: (inLog?.ranges ?? []) + (held[id] ?? []))
            return Replica(replica: id.description, user: known.user(id), isThisStore: id == files.replicaID, eventsInLog: inLog?.count ?? 0,
                           sequences: held.description, count: held.count)
        }
        let segments = segmentRecords.keys.sorted().compactMap { name -> Segment? in
            guard let stats = segmentRecords[name] else { return nil }
            return Segment(name: name, firstPosition: stats.first, endPosition: stats.end, records: stats.records,
                           bytes: FileSize.of(files.logDirectory + "/" + name), indexOK: !report.staleIndexes.contains(name))
        }
        var objectCount: Int?
        var objectsByEntity: [String: Int]?
        var digest: String?
        var loadedForObjects: LoadedStore?
        if wantObjects {
            let loaded = try LoadedStore.load(files, start: .newest, progress: nil)
            loadedForObjects = loaded
            let ids = loaded.projection.allObjectIDs()
            var byEntity: [String: Int] = [:]
            for id in ids {
                if let entity = loaded.projection.lifecycle(id)?.entity { byEntity[entity, default: 0] += 1 }
            }
            objectCount = ids.count
            objectsByEntity = byEntity
            digest = loaded.projection.digest()
        }
        let assets = Self.assets(files, schema: schema, loaded: loadedForObjects, notes: &notes)
        let entitySchemas = schema.entities.map { entity in
            EntitySchema(name: entity.name,
                         attributes: entity.attributes.map { "\($0.name): \($0.type.rawValue)\($0.isOptional ? "?" : "")\($0.isLocalOnly ? " (local only)" : "")" },
                         relationships: entity.relationships.map { "\($0.name) → \($0.isToMany ? "[\($0.destination)]" : $0.destination)\($0.inverse.map { " (inverse \($0))" } ?? "") \($0.deleteRule.rawValue)" })
        }
        var inspection = Inspection(
            store: files.name, replica: files.replicaID.description,
            startPosition: report.startPosition ?? identity.startPosition, endPosition: report.endPosition ?? report.startPosition ?? identity.startPosition,
            records: report.records, transactions: tally.transactions, events: tally.events,
            storedBytes: report.storedBytes, payloadBytes: report.payloadBytes,
            compressionRatio: report.payloadBytes > 0 ? Double(report.storedBytes) / Double(report.payloadBytes) : 0,
            segments: segments, eventsByKind: tally.byKind, eventsByEntity: tally.byEntity, replicas: replicas,
            authors: Self.authors(known, replicas: replicas), authorsWarning: known.warnings.first, lineage: Self.lineage(files, authors: known),
            snapshots: report.snapshots.map { SnapshotFile(name: $0.info.name, position: $0.info.position, problem: $0.problem.map { "\($0)" }) },
            objects: objectCount, objectsByEntity: objectsByEntity, digest: digest,
            syncCursors: files.syncCursors().map { Cursor(zone: $0.zone, token: $0.token, acknowledged: $0.acknowledged) },
            schema: entitySchemas, problems: report.problems.map { "\($0)" } + notes,
            adoptions: adoptionLines,
            tornTail: report.tornTail.map { "\($0.segment) at byte \($0.offset): \($0.reason) (\($0.droppedBytes) bytes; truncated when the store next opens)" })
        inspection.assets = assets
        return inspection
    }

    /// The asset counts, when the schema has an asset attribute or the store holds assets
    /// (otherwise `nil`, and no replay). What the objects name needs their projection: the one
    /// `--objects` rebuilt, or one rebuilt here from the newest snapshot.
    static func assets(_ files: StoreFiles, schema: Schema, loaded: LoadedStore?, notes: inout [String]) -> AssetSummary? {
        let inventory: AssetInventory
        do { inventory = try Store.assetInventory(ofStoreAt: files.directory) } catch {
            notes.append("cannot read the asset folder: \(error)")
            return nil
        }
        let namesAssets = AssetReferences.schemaNamesAssets(schema)
        guard namesAssets || !inventory.objects.isEmpty || !inventory.partials.isEmpty else { return nil }
        var references: AssetReferences?
        if let loaded {
            references = AssetReferences(loaded.projection)
        } else {
            do {
                references = AssetReferences(try LoadedStore.load(files, start: .newest, progress: nil).projection)
            } catch {
                notes.append("the assets the objects name are not counted: the objects cannot be rebuilt (\(error))")
            }
        }
        return AssetSummary(inventory: inventory, references: references)
    }

    var text: String {
        var lines: [String] = []
        lines.append("store     \(store)")
        lines.append("replica   \(replica)")
        lines.append("log       positions \(startPosition)..<\(endPosition): \(records) records, \(transactions) transactions, \(events) events"
                     + (adoptions.isEmpty ? "" : ", \(adoptions.count) adopted state(s)"))
        for adoption in adoptions { lines.append("          adopted at \(adoption)") }
        lines.append("size      \(Format.bytes(storedBytes)) on disk for \(Format.bytes(payloadBytes)) of events (compression ratio \(String(format: "%.2f", compressionRatio)))")
        if let assets { lines.append("assets    \(assets.text)") }
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
        if let objects, let objectsByEntity, let digest {
            lines.append("objects           \(objects): " + objectsByEntity.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            lines.append("digest            \(digest)")
        }
        lines.append("")
        lines.append("replicas")
        for r in replicas {
            lines.append("  \(r.replica)\(r.isThisStore ? " (this store)" : "")\(Authors.by(r.user))  holds \(r.count) events: \(r.sequences); \(r.eventsInLog) in the log")
        }
        lines.append(contentsOf: authorsLines)
        lines.append(contentsOf: lineageLines)
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

/// One replica's events in a log: how many, and their sequences as ranges (extended in place
/// while its transactions come in order, as they mostly do).
struct ReplicaInLog {
    var count = 0
    var ranges: [ClosedRange<UInt64>] = []

    mutating func add(_ range: ClosedRange<UInt64>) {
        count += range.count
        if let last = ranges.last, last.upperBound &+ 1 == range.lowerBound {
            ranges[ranges.count - 1] = last.lowerBound...range.upperBound
        } else {
            ranges.append(range)
        }
    }
}
