import Foundation
import Dispatch
import Strata
import StrataLog
import StrataCore

/// What `strata diff` finds between two stores: what each has seen of each replica, the events
/// one has and the other lacks (the earliest named as *the* first divergent event), the objects
/// and fields whose values differ with the event that set each side's value, and both logs'
/// timelines around the point where they part.
struct StoreDiff: Codable, Sendable {
    struct Side: Codable, Sendable {
        var store: String
        var replica: String
        /// Who pushed the store's own replica, when either store knows it.
        var user: String? = nil
        var transactionsInLog: Int
        var eventsApplied: UInt64
        /// Computed when both have applied the same events (otherwise they differ anyway).
        var digest: String?
        /// The snapshot the comparison started from, if any.
        var snapshot: String?
    }
    struct ReplicaSeen: Codable, Sendable {
        var replica: String
        var user: String? = nil
        var inA: String
        var inB: String
        var onlyInA: String
        var onlyInB: String
        var onlyInACount: UInt64
        var onlyInBCount: UInt64
    }
    /// An event one store holds and the other lacks.
    struct MissingEvent: Codable, Sendable {
        /// "a" or "b": the store that has it; "both" for an event both hold with different
        /// content (``StoreDiff/differingEvents``; `event` is then the earlier version in merge
        /// order) — only ever the first divergent event.
        var heldBy: String
        var replica: String
        var user: String? = nil
        var sequence: UInt64
        /// The event, when the holder's log still has it (`nil`: only its snapshot does).
        var event: EventDescription?
    }
    /// The event that set a value on one side.
    struct Blame: Codable, Sendable, Hashable {
        var replica: String
        var user: String? = nil
        var sequence: UInt64
        var hlc: UInt64
        var time: String
        /// Where it arrived in this side's log (`nil` when a snapshot holds it).
        var position: UInt64?
        /// Whether the other store has applied it too.
        var seenByOther: Bool
    }
    struct FieldDiff: Codable, Sendable {
        var field: String
        var a: JSONValue?
        var b: JSONValue?
        var blameA: Blame?
        var blameB: Blame?
    }
    struct MemberDiff: Codable, Sendable {
        var relationship: String
        var onlyInA: [String]
        var onlyInB: [String]
    }
    struct ObjectDiff: Codable, Sendable {
        var object: String
        var entity: String
        var existsInA: Bool
        var existsInB: Bool
        /// For an object that exists on one side only: the event that decided it on each side
        /// (an insert or a delete), absent where that side never saw the object.
        var existenceA: Blame?
        var existenceB: Blame?
        var fields: [FieldDiff]
        var members: [MemberDiff]
    }
    /// An event both stores hold with different content: one replica ID and sequence, two events
    /// (a store copied and both copies written, a value changed after it was written).
    struct DifferingEvent: Codable, Sendable {
        var replica: String
        var user: String? = nil
        var sequence: UInt64
        /// Each side's event, when its log still has it.
        var a: EventDescription?
        var b: EventDescription?
    }
    /// How the events both hold were compared: by digests of sequence ranges, descending only
    /// where they differ (what a device and a server exchange to compare remotely).
    struct DigestComparison: Codable, Sendable {
        var rounds: Int
        var bytes: Int
        /// Events both hold with content, compared.
        var compared: UInt64
    }
    struct TimelineEntry: Codable, Sendable {
        var position: UInt64
        var stored: String
        var replica: String
        var user: String? = nil
        var sequences: String
        var summary: [String]
        /// The other store lacks an event of this entry.
        var missingOnOtherSide: Bool
        /// The first such entry of this log.
        var divergencePoint: Bool
    }

    var a: Side
    var b: Side
    var equal: Bool
    var replicas: [ReplicaSeen]
    var onlyInACount: UInt64
    var onlyInBCount: UInt64
    var firstDivergent: MissingEvent?
    /// Events both hold with different content, in replica and sequence order (at most `limit`
    /// per replica, each replica's earliest among them).
    var differingEvents: [DifferingEvent] = []
    var differingTruncated = false
    var digestComparison: DigestComparison?
    /// The events only one side has, the first `limit` of each side in replica and sequence order.
    var onlyInA: [MissingEvent]
    var onlyInB: [MissingEvent]
    var objects: [ObjectDiff]
    var timelineA: [TimelineEntry]
    var timelineB: [TimelineEntry]
    /// Whether the lists were cut at the limit.
    var truncated: Bool
    /// Damage met while reading (the comparison covers what precedes it).
    var warnings: [String] = []

    // MARK: Computing

    /// - Parameter full: compare every object, not only those the differing events can reach.
    ///
    /// Read in two passes. The first reads both logs whole: every event fingerprinted, every
    /// sequence counted as applied, the references events make, but no object state past the
    /// snapshot it starts from. What differs in the events follows from that (which objects
    /// they reach); the second pass replays those objects alone. Two full replays of a million
    /// events each were the larger part of a diff; a partial one of the objects that differ is
    /// not. When every object must be compared (`full`, equal events whose states are compared by
    /// digest, a schema that differs, events not all read back), the second pass replays all.
    static func run(_ pathA: String, _ pathB: String, limit: Int = 1000, timelineWindow: Int = 200, full: Bool = false, progress: Progress?) throws -> StoreDiff {
        let files = try StoreFiles.pair(pathA, pathB)
        // (In a closure, so that the first pass's stores are freed before the comparison: with
        // a large snapshot, each holds all of its objects.)
        let (found, sideA, sideB) = try { () throws -> (Findings, LoadedStore, LoadedStore) in
            let ((firstA, digestsA), (firstB, digestsB)) = try LoadedStore.loadPair(files[0], files[1], replayingOnly: full ? nil : [],
                                                                                     collectingReferences: !full, progress: progress)
            let found = try findings(firstA, firstB, digests: (digestsA, digestsB), limit: limit, timelineWindow: timelineWindow)
            if full { return (found, firstA, firstB) }
            let needed = found.replayNeeded(firstA, firstB)
            let (sideA, sideB) = try LoadedStore.replayPair((firstA, firstB), replayingOnly: needed, progress: progress)
            return (found, sideA, sideB)
        }()
        let warnings = [sideA, sideB].compactMap { side in side.report.readWarning.map { "\(side.files.name): \($0)" } }
        var diff = try compare(sideA, sideB, found, full: full, progress: progress)
        // Either store may have learned a replica's user from the server.
        let authors = Authors(ofStoreAt: files[0].directory).merged(with: Authors(ofStoreAt: files[1].directory))
        diff.attribute(authors)
        diff.warnings = warnings + sideA.notes + sideB.notes + authors.warnings
        return diff
    }

    static func saturatingSum(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// What the comparison finds in the two logs, before any object is compared: the events one
    /// holds and the other lacks or holds otherwise, each described from its log, and the
    /// timelines' entries. It needs the stores' applied sequences and logs only, which a partial
    /// replay has as a full one does.
    struct Findings {
        var seen: [ReplicaSeen]
        var onlyInACount: UInt64
        var onlyInBCount: UInt64
        var differing: [EventID]
        var differingSet: Set<EventID>
        var differingTruncated: Bool
        var digestComparison: DigestComparison?
        var truncated: Bool
        /// Every event missing on a side was read back and described.
        var allDescribed: Bool
        var describedA: [MissingEvent]
        var describedB: [MissingEvent]
        var differingEvents: [DifferingEvent]
        var firstDivergent: MissingEvent?
        var timelinePositions: [[UInt64]]
        var divergencePositions: [UInt64?]
        var missingEntries: [Set<UInt64>]
        var decoded: [[UInt64: (entry: HistoryEntry, record: TransactionRecord)]]
        var adoptions: [[UInt64: (entry: HistoryEntry, record: AdoptionRecord)]]
        /// How many events of each side are listed.
        var limit: Int

        var sameEvents: Bool { onlyInACount == 0 && onlyInBCount == 0 }

        /// The events whose objects are compared, as `MissingEvent`s.
        var described: [MissingEvent] {
            describedA + describedB + differingEvents.flatMap { [$0.a, $0.b].compactMap { $0 } }.map {
                MissingEvent(heldBy: "both", replica: $0.replica, sequence: $0.sequence, event: $0)
            }
        }

        /// The objects a second pass must replay so that every object the comparison reads is
        /// as a full replay leaves it (`nil`: all of them). See ``StoreDiff/replayNeeded``.
        func replayNeeded(_ a: LoadedStore, _ b: LoadedStore) -> Set<ObjectID>? {
            // Equal events: the states are compared by digest, which reads every object.
            guard !sameEvents else { return nil }
            guard let named = StoreDiff.named(from: described, complete: allDescribed && !differingTruncated,
                                              a: a.projection, b: b.projection) else { return nil }
            return StoreDiff.replayNeeded(named: named, sides: [a, b])
        }
    }

    /// One side's part of ``Findings``: its timeline and the records read back from its log.
    struct SideFindings {
        var timelinePositions: [UInt64]
        var divergencePosition: UInt64?
        var missingEntries: Set<UInt64>
        var decoded: [UInt64: (entry: HistoryEntry, record: TransactionRecord)]
        var adoptions: [UInt64: (entry: HistoryEntry, record: AdoptionRecord)]
    }

    /// 3. The side's timeline: where its log first holds an event the other lacks (or holds with
    /// other content). 4. The records those events and the timeline are in, read back (the index
    /// knows where).
    static func sideFindings(_ store: LoadedStore, other: [ReplicaID: AppliedSequences], differing differingSet: Set<EventID>,
                             wanted: [EventID], timelineWindow: Int) throws -> SideFindings {
        let index = store.index
        var missingEntries = Set<UInt64>()
        var divergencePosition: UInt64?
        var replicaSets: [UInt32: AppliedSequences?] = [:]
        for entry in index.entries {
            let set = replicaSets[entry.replica] ?? other[index.replica(of: entry)]
            replicaSets[entry.replica] = set
            let replica = index.replica(of: entry)
            let lacks = entry.count > 0 && (0..<entry.count).contains { k in
                !(set?.contains(entry.firstSequence + k) ?? false) || differingSet.contains(EventID(replica: replica, sequence: entry.firstSequence + k))
            }
            if lacks {
                missingEntries.insert(entry.position)
                if divergencePosition == nil { divergencePosition = entry.position }
            }
        }
        let positions = index.entries.map(\.position)
        let start: Int
        if let point = divergencePosition, let at = positions.firstIndex(of: point) {
            start = max(0, at - timelineWindow / 10)
        } else {
            start = max(0, positions.count - timelineWindow)
        }
        let timelinePositions = Array(positions[start..<min(positions.count, start + timelineWindow)])

        var decoded: [UInt64: (entry: HistoryEntry, record: TransactionRecord)] = [:]
        // Adoption records in the timelines: states a side adopted from a zone (no events).
        var adoptions: [UInt64: (entry: HistoryEntry, record: AdoptionRecord)] = [:]
        var wantedPositions = Set(timelinePositions)
        for id in wanted {
            if let entry = store.index.entry(holding: id) { wantedPositions.insert(entry.position) }
        }
        let wantedEntries = index.entries.filter { wantedPositions.contains($0.position) }
        var records: [String: LogRecord] = [:]
        for entry in wantedEntries {
            let segment = index.segment(of: entry)
            let key = "\(segment)@\(entry.recordOffset)"
            if records[key] == nil {
                do {
                    records[key] = try SegmentLog.readRecord(segment: store.files.logDirectory + "/" + segment, offset: entry.recordOffset)
                } catch {
                    throw CLIError("cannot read back \(segment) at byte \(entry.recordOffset) of \(store.files.name): \(error)")
                }
            }
            guard let stored = records[key]?.entries.first(where: { $0.position == entry.position }) else { continue }
            let historyEntry = HistoryEntry(position: stored.position, timestamp: stored.timestamp, payload: stored.payload,
                                            segment: segment, recordOffset: entry.recordOffset)
            if AdoptionRecord.isAdoption(stored.payload) {
                adoptions[entry.position] = (historyEntry, try AdoptionRecord(decoding: stored.payload, position: stored.position))
                continue
            }
            decoded[entry.position] = (historyEntry, try TransactionRecord(decoding: stored.payload))
        }
        return SideFindings(timelinePositions: timelinePositions, divergencePosition: divergencePosition, missingEntries: missingEntries,
                            decoded: decoded, adoptions: adoptions)
    }

    static func findings(_ sideA: LoadedStore, _ sideB: LoadedStore, digests: (HistoryDigests?, HistoryDigests?) = (nil, nil),
                         limit: Int, timelineWindow: Int) throws -> Findings {
        let a = sideA.projection
        let b = sideB.projection

        // 1. What each has seen of each replica.
        let appliedA = Dictionary(uniqueKeysWithValues: a.appliedSequences().map { ($0.replica, $0) })
        let appliedB = Dictionary(uniqueKeysWithValues: b.appliedSequences().map { ($0.replica, $0) })
        let replicaIDs = Set(appliedA.keys).union(appliedB.keys).sorted()
        var seen: [ReplicaSeen] = []
        var missing: [(heldBy: Int, replica: ReplicaID, ranges: SequenceRanges)] = []
        for replica in replicaIDs {
            let inA = SequenceRanges(appliedA[replica])
            let inB = SequenceRanges(appliedB[replica])
            let onlyA = inA.subtracting(inB)
            let onlyB = inB.subtracting(inA)
            seen.append(ReplicaSeen(replica: replica.description, inA: inA.description, inB: inB.description,
                                    onlyInA: onlyA.description, onlyInB: onlyB.description,
                                    onlyInACount: onlyA.count, onlyInBCount: onlyB.count))
            if !onlyA.isEmpty { missing.append((0, replica, onlyA)) }
            if !onlyB.isEmpty { missing.append((1, replica, onlyB)) }
        }
        // Counts from applied sets a damaged or hostile snapshot may claim near 2^64: summed
        // without trapping (saturating), as they are only reported.
        let onlyInACount = missing.filter { $0.heldBy == 0 }.reduce(0) { Self.saturatingSum($0, $1.ranges.count) }
        let onlyInBCount = missing.filter { $0.heldBy == 1 }.reduce(0) { Self.saturatingSum($0, $1.ranges.count) }

        // 1b. The events both hold with content: compared by digests of sequence ranges.
        var differing: [EventID] = []
        var differingTruncated = false
        var digestComparison: DigestComparison?
        if let digestsA = digests.0, let digestsB = digests.1 {
            let outcome = try DigestBisection.compare(digestsA, with: digestsB, limit: limit)
            differing = outcome.differing
            differingTruncated = outcome.truncated
            let compared = digestsA.replicas.reduce(UInt64(0)) { sum, item in
                guard let other = digestsB.replicas[item.key] else { return sum }
                return Self.saturatingSum(sum, SequenceRangeSet.count(SequenceRangeSet.intersection(item.value.ranges, other.ranges)))
            }
            digestComparison = DigestComparison(rounds: outcome.rounds, bytes: outcome.bytesExchanged, compared: compared)
        }
        let differingSet = Set(differing)

        // 2. The events to describe: the first `limit` missing on each side (a replica's first
        // missing event is always among them: it is that replica's earliest, its clock being
        // monotonic), found in the holder's log by the index.
        var wanted: [[EventID]] = [[], []]
        var truncated = false
        var allDescribed = true
        let describeCap = max(limit, 100_000)
        for side in 0..<2 {
            let lists = missing.filter { $0.heldBy == side }
            let firsts = lists.compactMap { list in list.ranges.first.map { EventID(replica: list.replica, sequence: $0) } }
            // Up to `describeCap` are read back (the objects to compare follow from them); the
            // first `limit` are listed.
            var chosen = Set(firsts)
            for list in lists {
                for s in list.ranges.prefix(max(0, describeCap - chosen.count)) {
                    chosen.insert(EventID(replica: list.replica, sequence: s))
                }
            }
            let total = lists.reduce(UInt64(0)) { Self.saturatingSum($0, $1.ranges.count) }
            if UInt64(chosen.count) < total { allDescribed = false }
            if total > UInt64(limit) { truncated = true }
            // Both sides' versions of an event whose content differs.
            chosen.formUnion(differing)
            wanted[side] = chosen.sorted()
        }

        // 3. Each log's timeline, 4. the records to describe read back: each side at once (one
        // per core; see ``sideFindings``).
        let sides = [sideA, sideB]
        let perSide = Slots<Result<SideFindings, any Error>>()
        let wantedNow = wanted
        DispatchQueue.concurrentPerform(iterations: 2) { side in
            perSide.set(side, Result {
                try Self.sideFindings(sides[side], other: side == 0 ? appliedB : appliedA, differing: differingSet,
                                      wanted: wantedNow[side], timelineWindow: timelineWindow)
            })
        }
        guard let resultA = perSide.get(0), let resultB = perSide.get(1) else { throw CLIError("internal: a side was not compared") }
        let found = [try resultA.get(), try resultB.get()]
        let timelinePositions = found.map(\.timelinePositions)
        let divergencePositions = found.map(\.divergencePosition)
        let missingEntries = found.map(\.missingEntries)
        let decoded = found.map(\.decoded)
        let adoptions = found.map(\.adoptions)
        func describe(_ id: EventID, side: Int) -> MissingEvent {
            var description: EventDescription?
            if let entry = sides[side].index.entry(holding: id), let found = decoded[side][entry.position],
               let event = found.record.events.first(where: { $0.id == id }) {
                description = EventDescription(event, position: entry.position, stored: entry.timestamp)
            }
            return MissingEvent(heldBy: side == 0 ? "a" : "b", replica: id.replica.description, sequence: id.sequence, event: description)
        }
        let describedA = wanted[0].filter { !differingSet.contains($0) }.map { describe($0, side: 0) }
        let describedB = wanted[1].filter { !differingSet.contains($0) }.map { describe($0, side: 1) }
        let differingEvents = differing.map { id in
            DifferingEvent(replica: id.replica.description, sequence: id.sequence, a: describe(id, side: 0).event, b: describe(id, side: 1).event)
        }
        // Each with the earlier of its two versions in merge order (the one that can come first).
        let describedBoth = differingEvents.map { event in
            let earlier = [event.a, event.b].compactMap { $0 }.min { ($0.hlc, $0.replica) < ($1.hlc, $1.replica) }
            return MissingEvent(heldBy: "both", replica: event.replica, sequence: event.sequence, event: earlier)
        }
        // The first divergent event: the earliest in the merge order (HLC, then replica).
        let firstDivergent = (describedA + describedB + describedBoth).filter { $0.event != nil }.min { x, y in
            guard let ex = x.event, let ey = y.event else { return false }
            return (ex.hlc, ex.replica) < (ey.hlc, ey.replica)
        } ?? (describedA + describedB + describedBoth).first
        return Findings(seen: seen, onlyInACount: onlyInACount, onlyInBCount: onlyInBCount, differing: differing, differingSet: differingSet,
                        differingTruncated: differingTruncated, digestComparison: digestComparison, truncated: truncated,
                        allDescribed: allDescribed, describedA: describedA, describedB: describedB, differingEvents: differingEvents,
                        firstDivergent: firstDivergent, timelinePositions: timelinePositions, divergencePositions: divergencePositions,
                        missingEntries: missingEntries, decoded: decoded, adoptions: adoptions, limit: limit)
    }

    /// Compares the two stores' objects for what the log comparison found (``findings``).
    static func compare(_ sideA: LoadedStore, _ sideB: LoadedStore, _ found: Findings, full: Bool, progress: Progress?) throws -> StoreDiff {
        let a = sideA.projection
        let b = sideB.projection
        progress?.phase("comparing")
        defer { progress?.finish() }
        let differingSet = found.differingSet
        let differing = found.differing

        // 5. The objects and fields that differ, and who set each side's value.
        var objects: [ObjectDiff] = []
        var indexes = [sideA.index, sideB.index]
        func blame(_ provenance: FieldProvenance?, side: Int) -> Blame? {
            guard let provenance else { return nil }
            let other = side == 0 ? b : a
            // An event the other holds with other content is not one it has seen.
            return Blame(replica: provenance.event.replica.description, sequence: provenance.event.sequence, hlc: provenance.hlc.rawValue,
                         time: Format.time(provenance.hlc), position: indexes[side].entry(holding: provenance.event)?.position,
                         seenByOther: other.hasApplied(provenance.event) && !differingSet.contains(provenance.event))
        }
        // Digests only matter when the events are the same (equal digests then prove equal
        // objects; different ones point at a merge bug): both at once, one per core.
        let sameEvents = found.sameEvents
        var digestA: String?
        var digestB: String?
        if sameEvents {
            let computed = Slots<String>()
            let projections = UncheckedSendable([a, b])
            DispatchQueue.concurrentPerform(iterations: 2) { i in computed.set(i, projections.value[i].digest()) }
            digestA = computed.get(0)
            digestB = computed.get(1)
        }
        if !(sameEvents && digestA == digestB && differing.isEmpty) {
            let ids = full ? Set(a.allObjectIDs()).union(b.allObjectIDs()).sorted()
                : Self.reachable(from: found.described, complete: found.allDescribed && !sameEvents && !found.differingTruncated, a: a, b: b)
                    ?? Set(a.allObjectIDs()).union(b.allObjectIDs()).sorted()
            for id in ids {
                let objectA = a.object(id)
                let objectB = b.object(id)
                if objectA == objectB { continue }
                let entity = objectA?.entity ?? objectB?.entity ?? a.lifecycle(id)?.entity ?? b.lifecycle(id)?.entity ?? "?"
                var diff = ObjectDiff(object: id.description, entity: entity, existsInA: objectA != nil, existsInB: objectB != nil,
                                      fields: [], members: [])
                if objectA == nil || objectB == nil {
                    func decider(_ lifecycle: ObjectLifecycle?) -> FieldProvenance? {
                        guard let lifecycle else { return nil }
                        return lifecycle.exists ? lifecycle.inserted : lifecycle.deleted ?? lifecycle.inserted
                    }
                    diff.existenceA = blame(decider(a.lifecycle(id)), side: 0)
                    diff.existenceB = blame(decider(b.lifecycle(id)), side: 1)
                }
                if let objectA, let objectB {
                    let provenanceA = a.provenance(id)
                    let provenanceB = b.provenance(id)
                    // Local-only attributes never sync: devices differ there by design.
                    let localOnly = Set((a.schema.entity(entity)?.attributes ?? []).filter(\.isLocalOnly).map(\.name))
                    for key in Set(objectA.values.keys).union(objectB.values.keys).sorted() where !localOnly.contains(key) {
                        let valueA = objectA.values[key]
                        let valueB = objectB.values[key]
                        guard valueA != valueB else { continue }
                        diff.fields.append(FieldDiff(field: key, a: valueA.map(JSONValue.init), b: valueB.map(JSONValue.init),
                                                     blameA: blame(provenanceA[key], side: 0), blameB: blame(provenanceB[key], side: 1)))
                    }
                    for key in Set(objectA.toMany.keys).union(objectB.toMany.keys).sorted() {
                        let membersA = Set(objectA.toMany[key] ?? [])
                        let membersB = Set(objectB.toMany[key] ?? [])
                        guard membersA != membersB else { continue }
                        diff.members.append(MemberDiff(relationship: key, onlyInA: membersA.subtracting(membersB).sorted().map(\.description),
                                                       onlyInB: membersB.subtracting(membersA).sorted().map(\.description)))
                    }
                }
                if diff.existsInA && diff.existsInB && diff.fields.isEmpty && diff.members.isEmpty { continue }
                objects.append(diff)
            }
        }

        // 6. Timelines.
        let timelinePositions = found.timelinePositions
        let adoptions = found.adoptions
        let decoded = found.decoded
        let missingEntries = found.missingEntries
        let divergencePositions = found.divergencePositions
        func timeline(_ side: Int) -> [TimelineEntry] {
            timelinePositions[side].compactMap { position -> TimelineEntry? in
                if let adopted = adoptions[side][position] {
                    return TimelineEntry(position: position, stored: Format.time(microseconds: adopted.entry.timestamp), replica: "-",
                                         sequences: "-", summary: ["adopt \(adopted.record.origin): state \(adopted.record.stateDigest.prefix(16))"],
                                         missingOnOtherSide: false, divergencePoint: false)
                }
                guard let found = decoded[side][position] else { return nil }
                let record = found.record
                let sequences = record.sequences.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound)" : "\($0.lowerBound)…\($0.upperBound)" } ?? "-"
                let summary = record.events.prefix(6).map { EventDescription($0, position: nil, stored: nil).textDetail }
                    + (record.events.count > 6 ? ["… \(record.events.count - 6) more events"] : [])
                return TimelineEntry(position: position, stored: Format.time(microseconds: found.entry.timestamp), replica: record.replica.description,
                                     sequences: sequences, summary: summary, missingOnOtherSide: missingEntries[side].contains(position),
                                     divergencePoint: divergencePositions[side] == position)
            }
        }

        func side(_ loaded: LoadedStore, digest: String?) -> Side {
            Side(store: loaded.files.name, replica: loaded.files.replicaID.description, transactionsInLog: loaded.index.entries.count,
                 eventsApplied: loaded.projection.eventCount, digest: digest, snapshot: loaded.base?.name)
        }
        return StoreDiff(a: side(sideA, digest: digestA), b: side(sideB, digest: digestB),
                         equal: sameEvents && objects.isEmpty && digestA == digestB && differing.isEmpty,
                         replicas: found.seen, onlyInACount: found.onlyInACount, onlyInBCount: found.onlyInBCount,
                         firstDivergent: found.firstDivergent, differingEvents: found.differingEvents,
                         differingTruncated: found.differingTruncated, digestComparison: found.digestComparison,
                         onlyInA: Self.listed(found.describedA, limit: found.limit), onlyInB: Self.listed(found.describedB, limit: found.limit),
                         objects: objects, timelineA: timeline(0), timelineB: timeline(1), truncated: found.truncated)
    }
}

extension StoreDiff {
    /// The first `limit` events in replica and sequence order, plus each replica's first (the
    /// candidates for the first divergent event), so no replica goes unnamed.
    static func listed(_ events: [MissingEvent], limit: Int) -> [MissingEvent] {
        guard events.count > limit else { return events }
        var seen = Set<String>()
        return events.enumerated().filter { index, event in
            seen.insert(event.replica).inserted || index < limit
        }.map(\.element)
    }

    /// The objects whose visible state the differing events can have changed: those they name
    /// (as subject, member or reference target), and every object one reference away from those
    /// on either side — what derived relationships and dangling references read. `nil` when that
    /// cannot be known (not every differing event is described, or a schema event differs):
    /// then every object is compared.
    static func reachable(from missing: [MissingEvent], complete: Bool, a: ProjectionBuilder, b: ProjectionBuilder) -> [ObjectID]? {
        guard let named = named(from: missing, complete: complete, a: a, b: b) else { return nil }
        var result = named
        for id in named {
            result.formUnion(a.neighbours(of: id))
            result.formUnion(b.neighbours(of: id))
        }
        return result.sorted()
    }

    /// The objects the differing events name (as subject, member or reference target); `nil`
    /// when that cannot be known (see ``reachable(from:complete:a:b:)``).
    static func named(from missing: [MissingEvent], complete: Bool, a: ProjectionBuilder, b: ProjectionBuilder) -> Set<ObjectID>? {
        guard complete else { return nil }
        var named = Set<ObjectID>()
        for item in missing {
            guard let event = item.event else { return nil }
            // A schema event changes what every object of an entity reads — unless both sides
            // ended up with the same schema anyway.
            if event.kind == "schema" {
                if a.schema == b.schema { continue }
                return nil
            }
            for text in [event.object, event.target].compactMap({ $0 }) {
                if let id = ObjectID(text) { named.insert(id) }
            }
            for value in (event.fields ?? [:]).values {
                if case .string(let text) = value, let id = ObjectID(text) { named.insert(id) }
            }
        }
        return named
    }

    /// The objects a partial replay must hold for `named` and their neighbours to read as after a
    /// full replay, from a first pass that replayed none (``LoadedStore/references`` and the
    /// state it started from).
    ///
    /// An object's snapshot reads its own record (its own events), whether the objects it refers
    /// to exist (their own inserts and deletes), and which objects refer to it now (their
    /// records: derived relationships); its neighbours are the objects on either end of a
    /// reference. Every object that refers to or is referred to by an object now — or ever did —
    /// got there by the starting state or by an event, so with `near(S)` = S and every object on
    /// the other end of any reference of the starting state or of any event with S: the objects
    /// compared are within `near(named)`, and each of them reads only records within
    /// `near(near(named))`, which is what is replayed.
    static func replayNeeded(named: Set<ObjectID>, sides: [LoadedStore]) -> Set<ObjectID> {
        func near(_ objects: Set<ObjectID>) -> Set<ObjectID> {
            var result = objects
            for side in sides {
                for id in objects { result.formUnion(side.projection.neighbours(of: id)) }
                for (subject, target) in side.references {
                    if objects.contains(subject) { result.insert(target) }
                    if objects.contains(target) { result.insert(subject) }
                }
            }
            return result
        }
        return near(near(named))
    }
}

/// A value handed to `concurrentPerform`'s iterations, each of which touches its own part only.
struct UncheckedSendable<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// Results of work on other threads, one slot each.
final class KeyedSlots<Key: Hashable, Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Key: Value] = [:]

    func set(_ slot: Key, _ value: Value) {
        lock.lock()
        values[slot] = value
        lock.unlock()
    }

    func get(_ slot: Key) -> Value? {
        lock.lock()
        defer { lock.unlock() }
        return values[slot]
    }
}

typealias Slots<Value> = KeyedSlots<Int, Value>
typealias NamedSlots<Value> = KeyedSlots<String, Value>

extension StoreDiff {
    /// `--json`: the members the synthesized encoding writes, encoded at once
    /// (``JSONOutput/prettyObject(_:)``; `DiffJSONTests` checks it against the encoder's own
    /// output of the whole value).
    var json: String {
        get throws {
            try JSONOutput.prettyObject([
                ("a", a), ("b", b), ("equal", equal), ("replicas", replicas), ("onlyInACount", onlyInACount),
                ("onlyInBCount", onlyInBCount), ("firstDivergent", firstDivergent), ("differingEvents", differingEvents),
                ("differingTruncated", differingTruncated), ("digestComparison", digestComparison), ("onlyInA", onlyInA),
                ("onlyInB", onlyInB), ("objects", objects), ("timelineA", timelineA), ("timelineB", timelineB),
                ("truncated", truncated), ("warnings", warnings),
            ])
        }
    }
}
