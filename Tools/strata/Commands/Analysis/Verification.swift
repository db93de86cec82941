import Dispatch
@_spi(StrataInternals) import Strata
import StrataLog
import StrataCore

/// What `strata verify` checks on a store: every record's checksum and framing, position
/// continuity, indexes, snapshots, that every event decodes and applies, and that each snapshot's
/// digest equals the digest of a replay of the log up to its position.
struct Verification: Codable, Sendable {
    /// Something wrong, with where it is.
    struct Finding: Codable, Sendable, Hashable, CustomStringConvertible {
        var message: String
        var file: String?
        var offset: Int64?
        var position: UInt64?

        var description: String {
            var places: [String] = []
            if let file { places.append(file + (offset.map { " at byte \($0)" } ?? "")) }
            if let position { places.append("position \(position)") }
            return message + (places.isEmpty ? "" : " (\(places.joined(separator: ", ")))")
        }
    }
    struct SnapshotCheck: Codable, Sendable {
        var name: String
        var position: UInt64
        /// ok, damaged, matches replay, differs from replay, not cross-checked.
        var status: String
        /// For a snapshot that differs from the replay: whether the replay already holds
        /// everything it holds (merging it into the replay changes nothing), so that setting it
        /// aside loses nothing. `nil` for the others.
        var heldByLog: Bool? = nil
    }

    var store: String
    var replica: String
    var segments: Int
    var records: Int
    var events: Int
    var startPosition: UInt64
    var endPosition: UInt64
    var findings: [Finding]
    var notes: [String]
    var snapshots: [SnapshotCheck]
    /// Snapshots whose digest differs from the replay (candidates for `--repair`).
    var wrongSnapshots: [String]
    /// The asset directory's checks; `nil` when the schema has no asset attribute and the store
    /// holds no asset file.
    var assets: AssetCheck? = nil
    var healthy: Bool { findings.isEmpty }

    static func run(_ files: StoreFiles, progress: Progress?) throws -> Verification {
        // `store.json` first: damaged, or naming another log than the one beside it.
        var findings: [Finding] = files.identityProblem.map { [Finding(message: "the store's identity is damaged: \($0)", file: files.identityPath)] } ?? []
        var notes: [String] = []
        var checks: [SnapshotCheck] = []
        var wrong: [String] = []
        var events = 0
        let identity: LogIdentity
        do {
            identity = try SegmentLog.identity(at: files.logDirectory)
        } catch {
            // The first segment header is unreadable: the log walk says exactly where.
            let report = try SegmentLog.verify(at: files.logDirectory)
            let problem = report.problems.first
            return Verification(store: files.name, replica: files.replicaID.description, segments: report.segments, records: 0, events: 0,
                                startPosition: 0, endPosition: 0,
                                findings: findings + [Finding(message: problem?.message ?? "\(error)", file: problem?.file, offset: problem?.offset)],
                                notes: [], snapshots: [], wrongSnapshots: [])
        }
        let storeIdentity = files.storeIdentity
        if let recorded = storeIdentity?.logID, recorded != identity.logID.description {
            findings.append(Finding(message: "store.json names log \(recorded) but the log beside it is \(identity.logID); opening the store for writing will give it a new replica ID",
                                    file: files.identityPath))
        }
        if let lineage = storeIdentity?.lineage, !lineage.isEmpty {
            notes.append("replica lineage: " + lineage.map { "\($0.replica) → \($0.successor) (\($0.reason.rawValue), kept through \($0.keptThrough), \($0.reauthored) re-authored)" }.joined(separator: "; "))
        }
        // Snapshots that may count transactions a fork abandoned are never loaded by the store:
        // not checked against the replay (which skips those transactions).
        for info in identity.snapshots where info.position >= identity.startPosition && (storeIdentity?.isTainted(snapshotAt: info.position) ?? false) {
            checks.append(SnapshotCheck(name: info.name, position: info.position, status: "predates a fork: not used, not cross-checked"))
        }
        // The base: an empty projection when the whole history is still here, else the oldest
        // snapshot that verifies; every later snapshot is then checked against the replay.
        let adopted = AdoptedStates(storeDirectory: files.directory)
        var projection = ProjectionBuilder(identity: storeIdentity)
        projection.adoptedStates = adopted
        var base: SnapshotInfo?
        var pending = identity.snapshots.filter { $0.position >= identity.startPosition && !(storeIdentity?.isTainted(snapshotAt: $0.position) ?? false) }
            .sorted { $0.position < $1.position }
        var payloads: [String: [UInt8]] = [:]
        for info in pending {
            do {
                payloads[info.name] = try SegmentLog.readSnapshot(info, logID: identity.logID).payload
            } catch {
                checks.append(SnapshotCheck(name: info.name, position: info.position, status: "damaged: \(error)"))
                findings.append(Finding(message: "snapshot \(info.name) is damaged: \(error)", file: info.path))
            }
        }
        for info in identity.snapshots where info.position < identity.startPosition {
            checks.append(SnapshotCheck(name: info.name, position: info.position, status: "older than the retained log: not cross-checked"))
        }
        pending = pending.filter { payloads[$0.name] != nil }
        if identity.startPosition > 0 {
            guard let oldest = pending.first, let payload = payloads[oldest.name] else {
                findings.append(Finding(message: "no valid snapshot covers the retired history before position \(identity.startPosition)", file: files.logDirectory))
                return Verification(store: files.name, replica: files.replicaID.description, segments: 0, records: 0, events: 0,
                                    startPosition: identity.startPosition, endPosition: identity.startPosition, findings: findings,
                                    notes: [], snapshots: checks, wrongSnapshots: [])
            }
            do {
                projection = try ProjectionBuilder(snapshot: payload, identity: storeIdentity)
                projection.adoptedStates = adopted
            } catch {
                findings.append(Finding(message: "snapshot \(oldest.name) does not decode: \(error)", file: oldest.path))
            }
            base = oldest
            checks.append(SnapshotCheck(name: oldest.name, position: oldest.position, status: "ok (the base of the replay: history before it was retired)"))
            pending.removeFirst()
        }
        var replayBroken = false
        // The snapshots' own digests are worked out on another core while this one replays.
        let expectedDigests = NamedSlots<String>()
        let toDecode = UncheckedSendable(pending.compactMap { info in payloads[info.name].map { (info.name, $0) } })
        let decoding = DispatchGroup()
        DispatchQueue.global().async(group: decoding) {
            for (name, payload) in toDecode.value {
                if let digest = (try? ProjectionBuilder(snapshot: payload))?.digest() { expectedDigests.set(name, digest) }
            }
        }
        func checkSnapshots(upTo position: UInt64) {
            if let next = pending.first, next.position <= position { decoding.wait() }
            while let next = pending.first, next.position <= position {
                pending.removeFirst()
                guard !replayBroken, let payload = payloads[next.name] else {
                    checks.append(SnapshotCheck(name: next.name, position: next.position, status: "not cross-checked (the replay stopped earlier)"))
                    continue
                }
                let expected = expectedDigests.get(next.name) ?? (try? ProjectionBuilder(snapshot: payload))?.digest()
                if expected == projection.digest() {
                    checks.append(SnapshotCheck(name: next.name, position: next.position, status: "ok (digest matches a replay)"))
                } else {
                    // Does the log hold everything the snapshot holds? Then it is merely wrong;
                    // otherwise it may be the only copy of something (never removed by a repair).
                    var held = false
                    if let merged = try? ProjectionBuilder(snapshot: projection.snapshotPayload()),
                       let other = try? ProjectionBuilder(snapshot: payload), (try? merged.merge(other, believingApplied: nil)) != nil {
                        held = merged.digest() == projection.digest()
                    }
                    checks.append(SnapshotCheck(name: next.name, position: next.position, status: "DIGEST DIFFERS from a replay of the log", heldByLog: held))
                    findings.append(Finding(message: "snapshot \(next.name) does not match a replay of the log up to position \(next.position)",
                                            file: next.path, position: next.position))
                    wrong.append(next.path)
                }
            }
        }
        let from = base?.position ?? 0
        // Every event is decoded; they are applied only as far as a snapshot is left to check
        // against the replay (past the last one, a replay would prove nothing more).
        var decoder = EventTally()
        var adoptions = 0
        let report = try files.scan(progress: progress) { entry in
            guard !replayBroken else { return }
            checkSnapshots(upTo: entry.position)
            do {
                let header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                if header.isAdoption {
                    // The state it names must be kept as long as the log holds the entry (a full
                    // replay merges it), whether or not this replay goes through it.
                    let record = try AdoptionRecord(decoding: entry.payload, position: entry.position)
                    adoptions += 1
                    do {
                        _ = try adopted.payload(for: record, position: entry.position)
                    } catch {
                        replayBroken = true
                        findings.append(Finding(message: "the state adopted at position \(entry.position) (\(record.origin)) cannot be replayed: \(error)",
                                                file: adopted.path(of: record.contentHash), position: entry.position))
                        return
                    }
                }
                if entry.position >= from && !pending.isEmpty {
                    try projection.apply(encoded: entry.payload, position: entry.position)
                } else {
                    try decoder.add(encoded: entry.payload, position: entry.position)
                }
                events += Int(header.eventCount)
            } catch {
                replayBroken = true
                findings.append(Finding(message: "an event does not decode or apply: \(error)", file: files.logDirectory + "/" + entry.segment,
                                        offset: entry.recordOffset, position: entry.position))
            }
        }
        if report.problems.isEmpty { checkSnapshots(upTo: .max) } else { replayBroken = true; checkSnapshots(upTo: .max) }
        // Log-level problems come first: they are what `--repair` cuts at.
        let logFindings = report.problems.map { Finding(message: $0.message, file: $0.file, offset: $0.offset) }
        for (info, problem) in report.snapshots where problem != nil && !checks.contains(where: { $0.name == info.name }) {
            checks.append(SnapshotCheck(name: info.name, position: info.position, status: "damaged: \(problem.map { "\($0)" } ?? "")"))
        }
        if adoptions > 0 {
            notes.append("the log records \(adoptions) adopted state(s) (a zone snapshot merged in: `strata log --kind adopt` lists them); a replay merges each where it was adopted")
        }
        if let tail = report.tornTail {
            notes.append("torn tail in \(tail.segment) at byte \(tail.offset): \(tail.reason); \(tail.droppedBytes) bytes of an interrupted, never acknowledged append, cut when the store next opens")
        }
        for name in report.staleIndexes { notes.append("the index of \(name) is missing or stale (rebuilt when the store next opens)") }
        var schema = projection.schema
        for recorded in decoder.schemas { schema = schema.merged(with: recorded) }
        let assets = try Self.checkAssets(files, schema: schema, progress: progress != nil, notes: &notes)
        for finding in assets?.errors ?? [] { findings.append(Finding(message: finding.message, file: finding.file)) }
        var verification = Verification(store: files.name, replica: files.replicaID.description, segments: report.segments, records: report.records,
                                        events: events, startPosition: report.startPosition ?? identity.startPosition,
                                        endPosition: report.endPosition ?? identity.startPosition, findings: logFindings + findings, notes: notes,
                                        snapshots: checks.sorted { $0.position < $1.position }, wrongSnapshots: wrong)
        verification.assets = assets
        return verification
    }

    /// The asset checks, when the schema has an asset attribute or the store holds asset files.
    /// Which assets the objects name needs the newest state (a replay from the newest snapshot);
    /// when it cannot be rebuilt, the files are still checked.
    static func checkAssets(_ files: StoreFiles, schema: Schema, progress: Bool, notes: inout [String]) throws -> AssetCheck? {
        let inventory = try? Store.assetInventory(ofStoreAt: files.directory)
        let holdsFiles = !(inventory.map { $0.objects.isEmpty && $0.manifests.isEmpty && $0.partials.isEmpty && $0.strayFiles.isEmpty } ?? true)
        guard AssetReferences.schemaNamesAssets(schema) || holdsFiles else { return nil }
        var references: AssetReferences?
        do {
            references = AssetReferences(try LoadedStore.load(files, start: .newest, progress: nil).projection)
        } catch {
            notes.append("the assets the objects name were not checked: the objects cannot be rebuilt (\(error))")
        }
        let check = try AssetCheck.run(storeDirectory: files.directory, references: references, progress: progress)
        let remote = check.findings.filter { $0.kind == .remoteOnly }.count
        notes.append("assets: \(check.objectsChecked) file(s) verified (\(Format.bytes(Int64(clamping: check.bytesChecked)))), "
                     + (check.referenced.map { "\($0) referenced, \(remote) remote-only (fetched on demand)" } ?? "references not known"))
        for finding in check.findings where finding.severity == .warning { notes.append("asset \(finding)") }
        return check
    }

    var text: String {
        var lines = ["\(store): \(segments) segment(s), \(records) records, \(events) events, positions \(startPosition)..<\(endPosition)"]
        for check in snapshots { lines.append("snapshot \(check.name) (position \(check.position)): \(check.status)") }
        for note in notes { lines.append("note: \(note)") }
        if findings.isEmpty {
            lines.append("ok")
        } else {
            lines.append("FOUND \(findings.count) problem(s); the first:")
            for (i, finding) in findings.enumerated() { lines.append("\(i == 0 ? "  " : "  also: ")\(finding)") }
        }
        return lines.joined(separator: "\n")
    }
}
