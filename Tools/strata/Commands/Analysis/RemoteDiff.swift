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
        /// Sequences the device's log holds and the zone does not hold at all (not pushed yet:
        /// those the zone holds only in its snapshot are not counted), and the other way round
        /// (not pulled yet).
        var onlyOnDevice: String
        var onlyInZone: String
        var onlyOnDeviceCount: UInt64
        var onlyInZoneCount: UInt64
    }

    /// An event both hold with different content: the device's version (`nil` when its log no
    /// longer has it); the zone's is known by its fingerprint and HLC only.
    ///
    /// As ``RemoteDiff/firstDivergent`` it may also be an event only one side holds: `heldBy`
    /// says which ("device", "zone" or "both"), `hlc` is the one that placed it first.
    struct DifferingEvent: Codable, Sendable {
        var replica: String
        var sequence: UInt64
        var device: EventDescription?
        /// The zone's HLC of it (a server before release 0.16 does not send it).
        var zoneHLC: UInt64? = nil
        var heldBy: String? = nil
        var hlc: UInt64? = nil
    }
    /// One of the device's objects a differing event names, with the event that set each field.
    struct DeviceObject: Codable, Sendable {
        struct Field: Codable, Sendable {
            var field: String
            var value: JSONValue
            var setBy: StoreDiff.Blame?
        }
        var object: String
        var entity: String
        var exists: Bool
        var fields: [Field]
        /// Its to-many relationships' members on the device.
        var members: [String: [String]] = [:]
        /// Why it is listed: "named by an event that differs", "state differs", "only on the device".
        var reasons: [String] = []
    }

    /// The device's objects against the zone's state at `position`, by digests of object ID
    /// ranges (``StateBisection``): the objects both hold with other values, and those that exist
    /// on one side only, whatever either history still holds.
    struct StateComparison: Codable, Sendable {
        /// The zone's position the state is of (its end when the comparison began).
        var position: UInt64?
        var objectsOnDevice: Int
        var differing: [String]
        var onlyOnDevice: [String]
        var onlyInZone: [String]
        var truncated: Bool
        var rounds: Int
        var bytesSent: Int
        var bytesReceived: Int
        var isEmpty: Bool { differing.isEmpty && onlyOnDevice.isEmpty && onlyInZone.isEmpty }
    }

    var store: String
    var replica: String
    var zone: String
    var epoch: UInt64?
    var equal: Bool
    var replicas: [ReplicaHeld]
    /// Events both hold with their content, compared by digests.
    var compared: UInt64
    var differing: [DifferingEvent]
    var differingTruncated: Bool
    var firstDivergent: DifferingEvent?
    /// `nil` for a device with a download mask (it holds part of the zone's state by design), or
    /// a server before release 0.16 (a warning says so).
    var state: StateComparison?
    /// The device's objects the differing events name, and those whose state differs from the
    /// zone's, with the event that set each field.
    var objects: [DeviceObject]
    /// Damage met while reading the store, and events that could not be read back.
    var warnings: [String]
    var rounds: Int
    var bytesSent: Int
    var bytesReceived: Int
    var seconds: Double

    static func run(_ path: String, transport: HTTPSyncTransport, zone: ZoneReference, mask: DownloadMask, limit: Int,
                    progress: Progress?) async throws -> RemoteDiff {
        let files = try StoreFiles(path)
        let collector = HistoryDigestCollector(files)
        let loaded = try LoadedStore.load(files, start: .newest, progress: progress, digests: collector)
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
        var warnings = [loaded.report.readWarning].compactMap { $0 } + loaded.notes
        let applied = Dictionary(uniqueKeysWithValues: loaded.projection.appliedSequences().map { ($0.replica, $0) })
        let acknowledged = remote.acknowledged
        var compared: UInt64 = 0
        var firstOnlyOnDevice: [EventID] = []
        var onlyOnDevice: [ReplicaID: SequenceRanges] = [:]
        var firstOnlyInZone: [EventID] = []
        for replica in Set(local.replicas.keys).union(remoteRanges.keys).sorted() {
            let mine = SequenceRanges(halfOpen: local.replicas[replica]?.ranges ?? [])
            let theirs = SequenceRanges(halfOpen: remoteRanges[replica] ?? [])
            compared += SequenceRangeSet.count(SequenceRangeSet.intersection(local.replicas[replica]?.ranges ?? [], remoteRanges[replica] ?? []))
            // The zone holds 1…acknowledged of a replica (pushes are in order): what it holds
            // only in its snapshot is held all the same.
            let zoneHolds = acknowledged[replica].map { $0 > 0 ? SequenceRanges([1...$0]) : SequenceRanges() } ?? theirs
            let onlyMine = mine.subtracting(theirs).subtracting(zoneHolds)
            // A sequence the device applied from a snapshot or an adopted state is held without
            // content: not lacking.
            let onlyTheirs = theirs.subtracting(SequenceRanges(applied[replica]))
            guard !onlyMine.isEmpty || !onlyTheirs.isEmpty else { continue }
            if let first = onlyMine.first { firstOnlyOnDevice.append(EventID(replica: replica, sequence: first)) }
            if !onlyMine.isEmpty { onlyOnDevice[replica] = onlyMine }
            if let first = onlyTheirs.first { firstOnlyInZone.append(EventID(replica: replica, sequence: first)) }
            replicas.append(ReplicaHeld(replica: replica.description, onlyOnDevice: onlyMine.description, onlyInZone: onlyTheirs.description,
                                        onlyOnDeviceCount: onlyMine.count, onlyInZoneCount: onlyTheirs.count))
        }

        // The device's version of each differing event, from its log.
        var differing: [DifferingEvent] = []
        var records: [String: LogRecord] = [:]
        func describe(_ id: EventID) -> EventDescription? {
            guard let entry = loaded.index.entry(holding: id) else { return nil }
            let segment = loaded.index.segment(of: entry)
            let key = "\(segment)@\(entry.recordOffset)"
            do {
                if records[key] == nil {
                    records[key] = try SegmentLog.readRecord(segment: files.logDirectory + "/" + segment, offset: entry.recordOffset)
                }
                if let stored = records[key]?.entries.first(where: { $0.position == entry.position }),
                   let event = try TransactionRecord(decoding: stored.payload).events.first(where: { $0.id == id }) {
                    return EventDescription(event, position: entry.position, stored: entry.timestamp)
                }
            } catch {
                warnings.append("cannot read back \(id) from \(segment) at byte \(entry.recordOffset): \(error)")
            }
            return nil
        }
        for id in outcome.differing {
            differing.append(DifferingEvent(replica: id.replica.description, sequence: id.sequence, device: describe(id), zoneHLC: outcome.otherClocks[id]))
        }

        // The first divergent event: the earliest in the merge order (HLC, then replica) of the
        // events that differ and the first event of each replica one side holds and the other
        // lacks (a replica's clock only moves forward, so its first missing event is its earliest),
        // as `strata diff A B` names it. A differing event counts at the earlier of its two
        // versions; the zone's HLCs come with its answers, and for the events only it holds, from
        // one more round trip.
        var candidates: [DifferingEvent] = []
        for event in differing {
            let hlc = [event.device?.hlc, event.zoneHLC].compactMap { $0 }.min()
            candidates.append(DifferingEvent(replica: event.replica, sequence: event.sequence, device: event.device, zoneHLC: event.zoneHLC, heldBy: "both", hlc: hlc))
        }
        for first in firstOnlyOnDevice {
            let description = describe(first)
            candidates.append(DifferingEvent(replica: first.replica.description, sequence: first.sequence, device: description,
                                             heldBy: "device", hlc: description?.hlc))
        }
        if !firstOnlyInZone.isEmpty {
            do {
                let clocks = try await DigestBisection.clocks(of: firstOnlyInZone, from: remote)
                for first in firstOnlyInZone {
                    candidates.append(DifferingEvent(replica: first.replica.description, sequence: first.sequence, zoneHLC: clocks[first],
                                                     heldBy: "zone", hlc: clocks[first]))
                }
                if clocks.count < firstOnlyInZone.count {
                    warnings.append("the server sent no HLC for \(firstOnlyInZone.count - clocks.count) of the events only the zone holds (a server before release 0.16): the first divergent event is chosen without them")
                }
            } catch {
                warnings.append("the HLCs of the events only the zone holds could not be asked for (\(error)): the first divergent event is chosen without them")
            }
        }
        let firstDivergent = candidates.filter { $0.hlc != nil }.min { x, y in
            (x.hlc ?? .max, x.replica) < (y.hlc ?? .max, y.replica)
        } ?? candidates.first

        // The device's state against the zone's, by object (not for a masked device: it holds
        // part of the zone's state by design).
        var state: StateComparison?
        if mask.isEmpty, let epoch = remote.epoch {
            let deviceState = loaded.projection.stateDigests()
            // Once more from the zone's end when the state the comparison was pinned to went
            // away meanwhile (compacted, merged with a device's state, rewound, replayed lately).
            for attempt in 0..<2 where state == nil {
                let zoneState = transport.zoneStateDigests(zone, epoch: epoch)
                do {
                    let outcome = try await zoneState.compare(deviceState, limit: limit)
                    let (sent, received) = zoneState.bytes
                    state = StateComparison(position: zoneState.position, objectsOnDevice: deviceState.count,
                                            differing: outcome.differing.map(\.description), onlyOnDevice: outcome.onlyHere.map(\.description),
                                            onlyInZone: outcome.onlyThere.map(\.description), truncated: outcome.truncated, rounds: outcome.rounds,
                                            bytesSent: sent, bytesReceived: received)
                } catch let error as SyncError where attempt == 0 && [SyncError.Code(.tokenExpired), SyncError.Code(.serverBusy), SyncError.Code(.zoneRewound)].contains(error.code) {
                    continue
                } catch let error as SyncError where error.code == .notFound || error.code == .badRequest && zoneState.position == nil {
                    warnings.append("the server does not compare states by object (a server before release 0.16?): \(error); only the histories were compared")
                    break
                } catch {
                    warnings.append("the states could not be compared by object: \(error); only the histories were compared")
                    break
                }
            }
        }

        // The device's objects those events name, and those whose state differs, with the event
        // that set each field.
        var objects: [DeviceObject] = []
        let projection = loaded.projection
        var named = Set(differing.compactMap { $0.device?.object }.compactMap(ObjectID.init))
        if let state {
            named.formUnion((state.differing + state.onlyOnDevice).prefix(limit).compactMap(ObjectID.init))
        }
        let eventNamed = Set(differing.compactMap { $0.device?.object })
        let stateDiffers = Set(state?.differing ?? [])
        let stateOnlyHere = Set(state?.onlyOnDevice ?? [])
        for id in named.sorted() {
            let object = projection.object(id)
            var reasons: [String] = []
            if eventNamed.contains(id.description) { reasons.append("named by an event that differs") }
            if stateDiffers.contains(id.description) { reasons.append("state differs") }
            if stateOnlyHere.contains(id.description) { reasons.append("only on the device") }
            let provenance = projection.provenance(id)
            let entity = object?.entity ?? projection.lifecycle(id)?.entity ?? "?"
            let fields = (object?.values ?? [:]).sorted(by: { $0.key < $1.key }).map { key, value in
                DeviceObject.Field(field: key, value: JSONValue(value), setBy: provenance[key].map { p in
                    StoreDiff.Blame(replica: p.event.replica.description, sequence: p.event.sequence, hlc: p.hlc.rawValue, time: Format.time(p.hlc),
                                    position: loaded.index.entry(holding: p.event)?.position,
                                    seenByOther: !outcome.differing.contains(p.event) && onlyOnDevice[p.event.replica]?.contains(p.event.sequence) != true)
                })
            }
            let members = (object?.toMany ?? [:]).filter { !$0.value.isEmpty }.mapValues { $0.map(\.description) }
            objects.append(DeviceObject(object: id.description, entity: entity, exists: object != nil, fields: fields, members: members, reasons: reasons))
        }
        let (sent, received) = remote.bytes
        return RemoteDiff(store: path, replica: files.replicaID.description, zone: zone.description, epoch: remote.epoch,
                          equal: outcome.differing.isEmpty && replicas.isEmpty && state?.isEmpty != false, replicas: replicas, compared: compared,
                          differing: differing, differingTruncated: outcome.truncated, firstDivergent: firstDivergent, state: state, objects: objects,
                          warnings: warnings,
                          rounds: outcome.rounds, bytesSent: sent, bytesReceived: received, seconds: seconds)
    }

    var text: String {
        var lines: [String] = []
        lines.append("device  \(store)  replica \(replica.prefix(8))")
        lines.append("zone    \(zone)\(epoch.map { "  epoch \($0)" } ?? "")")
        for warning in warnings { lines.append("warning: \(warning)") }
        lines.append("events both hold with their content, compared by digests: \(compared) (\(rounds) round trips, \(bytesSent) bytes sent, \(bytesReceived) received, \(String(format: "%.1f", seconds * 1000)) ms)")
        if equal {
            lines.append("")
            lines.append("equal: the same events with the same content\(state == nil ? " (objects not compared)" : ", and every object the same")")
            return lines.joined(separator: "\n")
        }
        lines.append("")
        if let first = firstDivergent {
            lines.append("first divergent event (earliest in merge order): \(Self.describeFirst(first))")
        }
        if !replicas.isEmpty {
            lines.append("events held on one side only, by replica:")
            for r in replicas {
                var parts: [String] = []
                if r.onlyOnDeviceCount > 0 { parts.append("only on the device (not pushed yet, or lost by the server): \(r.onlyOnDevice)") }
                if r.onlyInZoneCount > 0 { parts.append("only in the zone (not pulled yet): \(r.onlyInZone)") }
                lines.append("  \(r.replica.prefix(8))  " + parts.joined(separator: "  "))
            }
        }
        lines.append("events both hold with different content: \(differing.count)\(differingTruncated ? "+" : "")")
        for event in differing.prefix(20) { lines.append("  " + Self.describe(event)) }
        if differing.count > 20 { lines.append("  … \(differing.count - 20) more (--json lists them)") }
        lines.append("")
        if let state {
            let at = state.position.map { " at position \($0)" } ?? ""
            lines.append("objects against the zone's state\(at), by digests (\(state.objectsOnDevice) on the device; \(state.rounds) round trips, \(state.bytesSent) bytes sent, \(state.bytesReceived) received):")
            if state.isEmpty {
                lines.append("  every object is the same on both sides")
            } else {
                lines.append("  differ (both hold it): \(state.differing.count)\(state.truncated ? "+" : ""); exist only on the device (created here, or deleted in the zone): \(state.onlyOnDevice.count); exist only in the zone (deleted here, or not pulled): \(state.onlyInZone.count)")
                if replicas.isEmpty && differing.isEmpty {
                    lines.append("  the histories agree but these objects do not: a merge or compaction problem on one side; keep the store (strata bundle STORE --redact) and report it")
                } else {
                    lines.append("  expected while the histories differ (above): sync, then compare again; what remains then is a real difference")
                }
                for id in state.onlyInZone.prefix(20) { lines.append("  only in the zone: \(id)") }
                if state.onlyInZone.count > 20 { lines.append("  … \(state.onlyInZone.count - 20) more only in the zone (--json lists them)") }
            }
        } else {
            lines.append("objects not compared (the device syncs with a download mask, or see the warnings above)")
        }
        if !objects.isEmpty {
            lines.append("")
            lines.append("the device's objects those events name or whose state differs: \(objects.count)")
            for object in objects.prefix(20) {
                let why = object.reasons.isEmpty ? "" : "  [\(object.reasons.joined(separator: ", "))]"
                lines.append("  \(object.entity) \(object.object)\(object.exists ? "" : " (deleted on the device)")\(why)")
                for field in object.fields {
                    let setBy = field.setBy.map { "← set by \(StoreDiff.event($0.replica, $0.sequence, $0.user)) at \($0.time)\($0.seenByOther ? "" : " (not in the zone as the device holds it: unpushed, or held there with other content)")" } ?? "(no event: a default or a derived relationship)"
                    lines.append("    \(field.field): \(StoreDiff.show(field.value)) \(setBy)")
                }
                for (name, members) in object.members.sorted(by: { $0.key < $1.key }) {
                    lines.append("    \(name): \(members.count) member\(members.count == 1 ? "" : "s")\(members.count <= 5 ? ": " + members.map { String($0.prefix(8)) }.joined(separator: ", ") : "")")
                }
            }
            if objects.count > 20 { lines.append("  … \(objects.count - 20) more (--json lists them)") }
        }
        return lines.joined(separator: "\n")
    }

    /// The first divergent event, with the side that holds it.
    static func describeFirst(_ event: DifferingEvent) -> String {
        switch event.heldBy {
        case "zone":
            let time = event.hlc.map { " at \(Format.time(HLC(rawValue: $0)))" } ?? ""
            return "\(StoreDiff.event(event.replica, event.sequence, nil)) only in the zone (not pulled yet)\(time)"
        case "device":
            return describe(event) + " (only on the device: not pushed yet, or lost by the server)"
        default:
            let zone = event.zoneHLC.map { ", the zone's version at \(Format.time(HLC(rawValue: $0)))" } ?? ""
            return describe(event) + " (both hold it with different content\(zone))"
        }
    }

    static func describe(_ event: DifferingEvent) -> String {
        guard let device = event.device else {
            return "\(StoreDiff.event(event.replica, event.sequence, nil)) (not in the device's log: a snapshot holds it)"
        }
        return "\(StoreDiff.event(event.replica, event.sequence, device.user)) on the device at #\(device.position.map(String.init) ?? "-"), \(device.time): \(device.textDetail)"
    }
}
