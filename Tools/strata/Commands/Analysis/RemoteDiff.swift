import Foundation
import Strata
import StrataLog
import StrataCore
import StrataProtocol
import StrataSync

/// What `strata diff STORE --server URL --zone Z` finds between a device's store and a zone on a
/// server, having exchanged only digests (``DigestBisection``): which sequences of each replica
/// one holds and the other lacks, the events both hold with different content (the earliest in
/// merge order named as the first divergent event), the device's objects those events touched,
/// and what the comparison cost.
struct RemoteDiff: Codable, Sendable {
    struct ReplicaHeld: Codable, Sendable {
        var replica: String
        /// Sequences the device's log holds and the zone's log does not (not pushed yet, or
        /// retired on the server by compaction), and the other way round (not pulled yet, or
        /// withheld from the device by its mask).
        var onlyOnDevice: String
        var onlyInZone: String
        var onlyOnDeviceCount: UInt64
        var onlyInZoneCount: UInt64
    }

    var store: String
    var replica: String
    var zone: String
    var epoch: UInt64?
    var equal: Bool
    var replicas: [ReplicaHeld]
    /// Events both hold with different content: the device's version (the zone's is known by
    /// its fingerprint only).
    var differing: [StoreDiff.MissingEvent]
    var differingTruncated: Bool
    var firstDivergent: StoreDiff.MissingEvent?
    /// The device's objects the differing events name, with the event that set each field.
    var objects: [StoreDiff.ObjectDiff]
    var rounds: Int
    var bytesSent: Int
    var bytesReceived: Int
    var seconds: Double

    static func run(_ path: String, transport: HTTPSyncTransport, zone: ZoneReference, mask: DownloadMask, limit: Int,
                    progress: Progress?) async throws -> RemoteDiff {
        let files = try StoreFiles(path)
        let collector = HistoryDigestCollector(files)
        var loaded = try LoadedStore.load(files, start: .newest, progress: progress, digests: collector)
        progress?.finish()
        let local = collector.finish()
        let clock = ContinuousClock()
        let started = clock.now
        let remote = transport.zoneDigests(zone, omitting: mask, replica: files.replicaID)
        let remoteRanges = try await remote.contentRanges()
        var bisection = DigestBisection(local: local, remoteRanges: remoteRanges, limit: limit)
        while case let requests = bisection.nextRequests(), !requests.isEmpty {
            try bisection.receive(try await remote.answer(requests))
        }
        let outcome = bisection.outcome
        let elapsed = (clock.now - started).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18

        // Held on one side only, per replica.
        var replicas: [ReplicaHeld] = []
        let applied = Dictionary(uniqueKeysWithValues: loaded.projection.appliedSequences().map { ($0.replica, $0) })
        for replica in Set(local.replicas.keys).union(remoteRanges.keys).sorted() {
            let mine = SequenceRanges(halfOpen: local.replicas[replica]?.ranges ?? [])
            let theirs = SequenceRanges(halfOpen: remoteRanges[replica] ?? [])
            let onlyMine = mine.subtracting(theirs)
            // Not in the zone's log is not "lacking": a sequence the device applied from a snapshot
            // or an adopted state is held without content.
            let onlyTheirs = theirs.subtracting(SequenceRanges(applied[replica]))
            guard !onlyMine.isEmpty || !onlyTheirs.isEmpty else { continue }
            replicas.append(ReplicaHeld(replica: replica.description, onlyOnDevice: onlyMine.description, onlyInZone: onlyTheirs.description,
                                        onlyOnDeviceCount: onlyMine.count, onlyInZoneCount: onlyTheirs.count))
        }

        // The device's version of each differing event, from its log.
        var differing: [StoreDiff.MissingEvent] = []
        var records: [String: LogRecord] = [:]
        for id in outcome.differing {
            var description: EventDescription?
            if let entry = loaded.index.entry(holding: id) {
                let segment = loaded.index.segment(of: entry)
                let key = "\(segment)@\(entry.recordOffset)"
                if records[key] == nil {
                    records[key] = try? SegmentLog.readRecord(segment: files.logDirectory + "/" + segment, offset: entry.recordOffset)
                }
                if let stored = records[key]?.entries.first(where: { $0.position == entry.position }),
                   let record = try? TransactionRecord(decoding: stored.payload),
                   let event = record.events.first(where: { $0.id == id }) {
                    description = EventDescription(event, position: entry.position, stored: entry.timestamp)
                }
            }
            differing.append(StoreDiff.MissingEvent(heldBy: "both", replica: id.replica.description, sequence: id.sequence, event: description))
        }
        let firstDivergent = differing.filter { $0.event != nil }.min { x, y in
            guard let ex = x.event, let ey = y.event else { return false }
            return (ex.hlc, ex.replica) < (ey.hlc, ey.replica)
        } ?? differing.first

        // The device's objects those events name, with blame.
        var objects: [StoreDiff.ObjectDiff] = []
        let projection = loaded.projection
        let named = Set(differing.compactMap { $0.event?.object }.compactMap(ObjectID.init))
        for id in named.sorted() {
            let object = projection.object(id)
            let provenance = projection.provenance(id)
            let entity = object?.entity ?? projection.lifecycle(id)?.entity ?? "?"
            var diff = StoreDiff.ObjectDiff(object: id.description, entity: entity, existsInA: object != nil, existsInB: false, fields: [], members: [])
            for (key, value) in (object?.values ?? [:]).sorted(by: { $0.key < $1.key }) {
                let blame = provenance[key].map { p in
                    StoreDiff.Blame(replica: p.event.replica.description, sequence: p.event.sequence, hlc: p.hlc.rawValue, time: Format.time(p.hlc),
                                    position: loaded.index.entry(holding: p.event)?.position, seenByOther: false)
                }
                diff.fields.append(StoreDiff.FieldDiff(field: key, a: JSONValue(value), b: nil, blameA: blame, blameB: nil))
            }
            objects.append(diff)
        }
        let (sent, received) = remote.bytes
        return RemoteDiff(store: path, replica: files.replicaID.description, zone: zone.description, epoch: remote.epoch,
                          equal: outcome.differing.isEmpty && replicas.isEmpty, replicas: replicas, differing: differing,
                          differingTruncated: outcome.truncated, firstDivergent: firstDivergent, objects: objects,
                          rounds: outcome.rounds, bytesSent: sent, bytesReceived: received, seconds: seconds)
    }

    var text: String {
        var lines: [String] = []
        lines.append("device  \(store)  replica \(replica.prefix(8))")
        lines.append("zone    \(zone)")
        lines.append("compared by digests: \(rounds) rounds, \(bytesSent) bytes sent, \(bytesReceived) received, \(String(format: "%.1f", seconds * 1000)) ms")
        if equal {
            lines.append("")
            lines.append("equal: every event both hold has the same content, and each holds what the other does")
            return lines.joined(separator: "\n")
        }
        lines.append("")
        for r in replicas {
            var parts: [String] = []
            if r.onlyOnDeviceCount > 0 { parts.append("only on the device: \(r.onlyOnDevice)") }
            if r.onlyInZoneCount > 0 { parts.append("only in the zone: \(r.onlyInZone)") }
            lines.append("  \(r.replica.prefix(8))  " + parts.joined(separator: "  "))
        }
        lines.append("events both hold with different content: \(differing.count)\(differingTruncated ? "+" : "")")
        if let first = firstDivergent {
            lines.append("first divergent event (earliest in merge order): \(StoreDiff.describe(first))")
        }
        for event in differing.prefix(20) { lines.append("  " + StoreDiff.describe(event)) }
        if differing.count > 20 { lines.append("  … \(differing.count - 20) more (--json lists them)") }
        if !objects.isEmpty {
            lines.append("")
            lines.append("the device's objects those events name: \(objects.count)")
            for object in objects.prefix(20) {
                lines.append("  \(object.entity) \(object.object)\(object.existsInA ? "" : " (deleted on the device)")")
                for field in object.fields {
                    lines.append("    \(field.field): \(StoreDiff.show(field.a)) \(StoreDiff.blame(field.blameA))")
                }
            }
        }
        return lines.joined(separator: "\n")
    }
}
