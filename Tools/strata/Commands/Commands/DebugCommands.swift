import ArgumentParser
import Foundation
@_spi(StrataInternals) import Strata
import StrataLog
import StrataCore
import StrataSync
import StrataSyncAsyncHTTPClient
import AsyncHTTPClient

/// `strata inspect STORE`: what the store holds and how it is laid out.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Segments, positions, sizes, compression, events by kind and entity, replicas, snapshots, sync cursors, schema, assets."
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Flag(help: "Also rebuild the objects (a replay from the newest snapshot) to count them by entity and compute the digest.")
    var objects = false

    @OptionGroup var zoneOption: ZoneOption

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func run() throws {
        let targets = try ZoneTargets(store, zone: zoneOption.zone)
        guard let layout = targets.layout else {
            let files = try StoreFiles(store)
            let inspection = try Inspection.run(files, objects: objects, progress: Progress("inspect", total: files.segmentBytes()))
            print(json ? try JSONOutput.string(inspection) : inspection.text)
            return
        }
        // A database: one section per zone (its store's inspection), then the zones set aside.
        struct LostJSON: Encodable {
            var zone: String
            var store: String
            var reason: String
            /// When it was set aside (milliseconds since 1970).
            var at: UInt64
            var unpushedEdits: Int
        }
        struct DatabaseInspection: Encodable {
            var database: String
            var defaultZone: String
            var zones: [Zoned<Inspection>]
            var lost: [LostJSON]
        }
        var zones: [Zoned<Inspection>] = []
        for target in targets.targets {
            let files = try StoreFiles(target.path)
            let inspection = try Inspection.run(files, objects: objects, progress: Progress("inspect \(target.zone?.description ?? "")", total: files.segmentBytes()))
            zones.append(Zoned(zone: target.zone, value: inspection))
        }
        // Lost zones belong to the whole database; with --zone, only that zone's.
        let lost = layout.lost.filter { entry in zoneOption.zone.map { ZoneTargets.reference($0) == entry.zone.zone } ?? true }
            .map { LostJSON(zone: $0.zone.zone.description, store: $0.path, reason: $0.zone.reason.rawValue, at: $0.zone.at, unpushedEdits: $0.zone.unpushedEdits) }
        if json {
            print(try JSONOutput.string(DatabaseInspection(database: store, defaultZone: layout.defaultZone.description, zones: zones, lost: lost)))
            return
        }
        var text = "database \(store): \(layout.zones.count) zone(s), default \(layout.defaultZone), \(layout.lost.count) set aside\n"
        for zone in zones {
            let name = zone.zone?.description ?? ""
            text += "\n== zone \(name)\(zone.zone == layout.defaultZone ? " (default)" : "") ==\n"
            text += zone.value.text
            if !text.hasSuffix("\n") { text += "\n" }
        }
        if !lost.isEmpty {
            text += "\n== lost zones (set aside) ==\n"
            for entry in lost {
                let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(entry.at) / 1000))
                text += "\(entry.zone): \(entry.reason) at \(when), \(entry.unpushedEdits) unpushed edit(s) kept in \(entry.store)\n"
            }
        }
        print(text, terminator: "")
    }
}

/// Lines written in large blocks: `log` on a million events must not make a million writes.
struct BufferedOutput {
    private var buffer: [UInt8] = []

    mutating func line(_ text: String) {
        buffer.append(contentsOf: text.utf8)
        buffer.append(10)
        if buffer.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        guard !buffer.isEmpty else { return }
        FileHandle.standardOutput.write(Data(buffer))
        buffer.removeAll(keepingCapacity: true)
    }
}

/// `strata verify STORE [--repair]`.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every record, position, index and snapshot of a store, that each snapshot matches a replay, and every asset file.",
        discussion: """
        Exit 1 with the first problem's file and byte offset when something is wrong. Asset files are hashed \
        (streamed) against their names and manifests, chunk by chunk; an asset the objects name but the store \
        does not hold is no problem (it is fetched on demand).
        """
    )

    @Argument(help: "The store directory (or a bare log directory).")
    var store: String

    @Flag(help: "Truncate the log at the first bad record and set aside damaged snapshots and those past the repaired log's end, keeping everything removed in STORE/quarantine/; resets the sync cursors so the next sync pulls the zone again. Never removes an intact snapshot within the log that holds what the log does not. A damaged asset file goes to the quarantine too (fetched again when needed); a damaged manifest of a file that verifies is written again.")
    var repair = false

    @Flag(help: "Do not ask before repairing.")
    var yes = false

    @OptionGroup var zoneOption: ZoneOption

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func run() throws {
        let targets = try ZoneTargets(store, zone: zoneOption.zone)
        guard targets.isDatabase else { return try verify(store) }
        if repair {
            // A repair changes one store: the zone it repairs is named, never all at once.
            guard zoneOption.zone != nil, let target = targets.targets.first else {
                throw CLIError("--repair on the database \(store) needs --zone: one zone's store is repaired at a time")
            }
            return try verify(target.path)
        }
        // A database: every zone's store checked (or --zone's); a finding in any is exit 1.
        var verifications: [Zoned<Verification>] = []
        for target in targets.targets {
            let files = try StoreFiles(target.path, tolerateDamagedIdentity: true)
            verifications.append(Zoned(zone: target.zone, value: try Verification.run(files, progress: Progress("verify \(target.zone?.description ?? "")", total: files.segmentBytes()))))
        }
        if json {
            struct DatabaseVerification: Encodable {
                var database: String
                var zones: [Zoned<Verification>]
            }
            print(try JSONOutput.string(DatabaseVerification(database: store, zones: verifications)))
        } else {
            for verification in verifications {
                print("== zone \(verification.zone?.description ?? "") ==")
                print(verification.value.text)
            }
        }
        if verifications.contains(where: { !$0.value.findings.isEmpty }) { throw ExitCode(ExitStatus.finding) }
    }

    /// Verifies (and with `--repair`, repairs) one store, or a bare log directory.
    private func verify(_ store: String) throws {
        // A debug bundle is checked as the store it holds (its log as copied, record by record);
        // there is nothing to repair in it.
        if DebugBundle.isBundle(store) {
            if repair { throw CLIError("\(store) is a debug bundle: there is nothing to repair in it (repair the store it was made of)") }
            let files = try StoreFiles(store, tolerateDamagedIdentity: true)
            let verification = try Verification.run(files, progress: Progress("verify", total: files.segmentBytes()))
            print(json ? try JSONOutput.string(verification) : verification.text)
            if !verification.findings.isEmpty { throw ExitCode(ExitStatus.finding) }
            return
        }
        // A bare segment log (no store.json) is checked at the log level only.
        if !FileManager.default.fileExists(atPath: store + "/store.json") && FileManager.default.fileExists(atPath: store) {
            return try LogOnlyVerify(directory: store, repair: repair, yes: yes, json: json).run()
        }
        // A damaged store.json is a finding (exit 1), not a usage error: the log is still checked.
        let files = try StoreFiles(store, tolerateDamagedIdentity: true)
        let verification = try Verification.run(files, progress: Progress("verify", total: files.segmentBytes()))
        print(json ? try JSONOutput.string(verification) : verification.text)
        guard var first = verification.findings.first else { return }
        guard repair else { throw ExitCode(ExitStatus.finding) }
        // The identity cannot be repaired from the log: restoring it is the user's call.
        let repairable = verification.findings.filter { $0.file != files.identityPath }
        guard let firstRepairable = repairable.first else {
            print("not repaired: \(files.identityPath) must be restored by hand (or the store moved aside)")
            throw ExitCode(ExitStatus.finding)
        }
        first = firstRepairable
        let logProblem = first.file.map { $0.hasPrefix(files.logDirectory) && $0.hasSuffix(".seg") } ?? false
        let onlyAssets = repairable.allSatisfy { finding in verification.assets?.errors.contains { $0.file == finding.file } ?? false }
        let what = (logProblem ? "truncate the log at \(first.file ?? "?") byte \(first.offset ?? 0), " : "")
            + (onlyAssets ? "set the damaged asset files aside in \(store)/\(Quarantine.folderName)/ (they are fetched again when needed)"
                          : "move what is removed into \(store)/\(Quarantine.folderName)/ and reset the sync cursors (the next sync pulls the zone again)")
        guard try confirm("Repair \(store): \(what)?") else { throw ExitCode(ExitStatus.finding) }
        let quarantine = try Quarantine(store: store)
        var current = verification
        var repaired = false
        if logProblem {
            let salvage: SalvageReport
            do {
                salvage = try SegmentLog.salvage(at: files.logDirectory)
            } catch {
                throw CLIError("cannot repair \(store): \(error)")
            }
            if let cut = salvage.quarantine { try quarantine.move(cut, as: "log-cut") }
            print("repaired: \(RepairText.describe(salvage).replacingOccurrences(of: salvage.quarantine ?? "\u{0}", with: quarantine.folder + "/log-cut"))")
            repaired = true
            // The states whose adoption records the cut took go with them (a damaged log does not
            // read past the damage, so what it named before cannot be listed: every kept state no
            // record of the repaired log names goes, which the next compaction would delete).
            let adopted = AdoptedStates(storeDirectory: store)
            let named = Self.adoptedStatesNamed(in: files)
            for hash in adopted.kept() where !named.contains(hash) {
                try quarantine.move(adopted.path(of: hash), as: "adopted/" + hash + ".state")
                print("set aside the adopted state \(hash) (kept in \(quarantine.folder)): no record of the repaired log names it")
            }
            current = try Verification.run(files, progress: nil)
        }
        let (moved, refused) = try RepairText.setAsideSnapshots(current, in: files.logDirectory, quarantine: quarantine)
        for name in moved { print("set aside snapshot \(name) (kept in \(quarantine.folder))") }
        repaired = repaired || !moved.isEmpty
        // Assets are not in the log: setting one aside changes no sync cursor.
        for line in try AssetRepair.run(current.assets, store: store, quarantine: quarantine) { print(line) }
        if repaired {
            for cursor in try quarantine.moveSyncCursors(of: store) { print("reset the sync cursor \(cursor) (kept in \(quarantine.folder)): the next sync pulls the zone again") }
        }
        quarantine.removeIfEmpty()
        let again = try Verification.run(files, progress: nil)
        for reason in refused { print("not repaired: \(reason)") }
        print(again.healthy ? "the store now verifies" : "still wrong: \(again.findings.first.map { "\($0)" } ?? "")")
        if !again.healthy { throw ExitCode(ExitStatus.finding) }
    }

    /// The content hashes of the states the adoption records in the store's log name (records that
    /// do not read are left out: verify reports them).
    static func adoptedStatesNamed(in files: StoreFiles) -> Set<String> {
        var named: Set<String> = []
        _ = try? files.scan(progress: nil) { entry in
            if AdoptionRecord.isAdoption(entry.payload), let record = try? AdoptionRecord(decoding: entry.payload) { named.insert(record.contentHash) }
        }
        return named
    }

    func confirm(_ question: String) throws -> Bool {
        if yes { return true }
        print(question + " [y/N] ", terminator: "")
        return readLine()?.lowercased().hasPrefix("y") == true
    }
}

/// What `strata verify --repair` does to the asset directory: a damaged asset file (and its
/// manifest) goes to the quarantine — the store then lacks it, so it is fetched again from the
/// zone when needed; a missing or damaged manifest of a file that verifies is written again from
/// the file (the old one kept in the quarantine).
enum AssetRepair {
    static func run(_ check: AssetCheck?, store: String, quarantine: Quarantine) throws -> [String] {
        guard let check else { return [] }
        var lines: [String] = []
        for finding in check.errors {
            guard let hex = finding.asset, let hash = AssetHash(hex: hex) else { continue }
            let (objectPath, manifestPath) = Store.assetPaths(of: hash, ofStoreAt: store)
            switch finding.kind {
            case .damagedObject:
                if FileManager.default.fileExists(atPath: objectPath) { try quarantine.move(objectPath, as: "assets/objects/" + hex) }
                if FileManager.default.fileExists(atPath: manifestPath) { try quarantine.move(manifestPath, as: "assets/manifests/" + hex) }
                lines.append("set aside the damaged asset \(hex) (kept in \(quarantine.folder)): it is fetched again when needed")
            case .damagedManifest:
                guard let manifest = check.rebuiltManifests[hash] else { continue }
                if FileManager.default.fileExists(atPath: manifestPath) { try quarantine.move(manifestPath, as: "assets/manifests/" + hex) }
                do { try Store.writeAssetManifest(manifest, ofStoreAt: store) } catch {
                    throw CLIError("cannot write the manifest of asset \(hex): \(error)")
                }
                lines.append("wrote the manifest of asset \(hex) again from its verified file")
            case .manifestWithoutObject, .remoteOnly, .strayFile, .interruptedImport:
                continue
            }
        }
        return lines
    }
}

enum RepairText {
    static func describe(_ salvage: SalvageReport) -> String {
        "truncated \(salvage.truncatedSegment ?? "-") at byte \(salvage.truncatedAt.map(String.init) ?? "-"), removed \(salvage.removedSegments.count) later segment(s); dropped \(salvage.droppedRecords) record(s) that still verified (\(salvage.droppedEntries) entries) and \(salvage.droppedBytes) bytes, positions \(salvage.droppedPositions.lowerBound)..<\(salvage.droppedPositions.upperBound); copies in \(salvage.quarantine ?? "-"); the log now ends at position \(salvage.endPosition)"
    }

    /// Moves into the quarantine the snapshots that cannot be used: damaged ones (their checksum
    /// fails: the store already skips them), ones past the end of a log a repair cut (they count
    /// positions the log no longer holds, and the log goes on from its new end), and ones that
    /// differ from a replay of the log while the replay holds everything they hold (merging them
    /// into it changes nothing). A snapshot that holds something the log does not is never
    /// moved: it may be the only copy of a state (the store loads it), so the repair refuses and
    /// says why.
    ///
    /// - Returns: the names moved, and why others were not.
    static func setAsideSnapshots(_ verification: Verification, in logDirectory: String, quarantine: Quarantine) throws -> (moved: [String], refused: [String]) {
        var moved: [String] = []
        var refused: [String] = []
        for check in verification.snapshots {
            let damaged = check.status.hasPrefix("damaged")
            let differs = check.status.hasPrefix("DIGEST DIFFERS")
            // Past the end of the log (a cut took what it covers): unusable whatever it holds,
            // since the log goes on from its new end.
            let pastEnd = check.position > verification.endPosition
            guard damaged || differs || pastEnd else { continue }
            let path = logDirectory + "/" + check.name
            guard FileManager.default.fileExists(atPath: path) else { continue }
            if damaged || pastEnd || check.heldByLog == true {
                try quarantine.move(path, as: "snapshots/" + check.name)
                moved.append(check.name)
            } else {
                refused.append("snapshot \(check.name) (position \(check.position)) is intact, differs from a replay of the log and holds what the log does not; it is kept, since it may be the only copy of that (the store loads it). Compare it with the zone by syncing a copy of the store with --from-scratch")
            }
        }
        return (moved, refused)
    }
}

/// Where `strata verify --repair` keeps what it removes from a store: `STORE/quarantine/<time>/`
/// (cut log records under `log-cut/`, snapshots under `snapshots/`, sync cursors as they were).
/// Nothing a repair removes is deleted: a repair never destroys the only copy of anything.
struct Quarantine {
    static let folderName = "quarantine"
    let folder: String

    init(store: String) throws {
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        var folder = store + "/" + Self.folderName + "/" + stamp
        var n = 1
        while FileManager.default.fileExists(atPath: folder) {
            n += 1
            folder = store + "/" + Self.folderName + "/" + stamp + "-\(n)"
        }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw CLIError("cannot create the quarantine folder \(folder): \(error)")
        }
        self.folder = folder
    }

    /// Moves `path` to `name` inside the quarantine.
    func move(_ path: String, as name: String) throws {
        let target = folder + "/" + name
        do {
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: path, toPath: target)
        } catch {
            throw CLIError("cannot move \(path) into the quarantine \(folder): \(error)")
        }
    }

    /// Moves the store's sync cursors (`sync-<zone>.json`) into the quarantine: after a repair
    /// they may claim that the store holds what the repair cut, so the next sync must start
    /// over (it pulls the zone again and pushes what the server lacks). Returns their names.
    func moveSyncCursors(of store: String) throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: store)) ?? []
        let cursors = names.filter { $0.hasPrefix("sync-") && $0.hasSuffix(".json") && $0 != "sync-pins.json" }.sorted()
        for name in cursors { try move(store + "/" + name, as: name) }
        return cursors
    }

    /// Removes the folder when the repair moved nothing into it.
    func removeIfEmpty() {
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: folder), contents.isEmpty {
            try? FileManager.default.removeItem(atPath: folder)
            let parent = (folder as NSString).deletingLastPathComponent
            if let rest = try? FileManager.default.contentsOfDirectory(atPath: parent), rest.isEmpty {
                try? FileManager.default.removeItem(atPath: parent)
            }
        }
    }
}

/// `strata verify LOG_DIRECTORY`: the segment-log checks alone, for a bare log.
struct LogOnlyVerify {
    var directory: String
    var repair: Bool
    var yes: Bool
    var json: Bool

    func run() throws {
        let report: VerifyReport
        do {
            report = try SegmentLog.verify(at: directory)
        } catch {
            throw CLIError("cannot verify \(directory): \(error)")
        }
        print("\(report.segments) segments, \(report.records) records, \(report.entries) entries, positions \(report.startPosition ?? 0)..<\(report.endPosition ?? 0)")
        if let tail = report.tornTail { print("note: torn tail in \(tail.segment) at byte \(tail.offset) (\(tail.droppedBytes) bytes; truncated on next open): \(tail.reason)") }
        for (info, problem) in report.snapshots { print("snapshot \(info.name): \(problem.map { "DAMAGED: \($0)" } ?? "ok")") }
        guard let problem = report.problems.first else {
            if report.isHealthy { print("ok") } else { throw ExitCode(ExitStatus.finding) }
            return
        }
        print("FOUND: \(problem)")
        guard repair else { throw ExitCode(ExitStatus.finding) }
        if !yes {
            print("Truncate the log at \(problem.file ?? "?") byte \(problem.offset ?? 0)? [y/N] ", terminator: "")
            guard readLine()?.lowercased().hasPrefix("y") == true else { throw ExitCode(ExitStatus.finding) }
        }
        do {
            print("repaired: \(RepairText.describe(try SegmentLog.salvage(at: directory)))")
        } catch {
            throw CLIError("cannot repair \(directory): \(error)")
        }
    }
}

/// `strata replay STORE --until POSITION|TIME [--object ID]`.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "The objects as they were at a log position or time; with --object, one object's whole history and who set each value."
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Option(help: "A log position (included) or a time (ISO 8601, or @microseconds): the state after everything stored up to it. Default: everything.")
    var until: String?

    @Option(help: "Show this object's history instead: every event that named it and which one set each current value.")
    var object: String?

    @Option(help: "Only objects of this entity.")
    var entity: String?

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func validate() throws {
        if let until, Cutoff(argument: until) == nil { throw ValidationError("--until: neither a log position nor a time: \(until)") }
        if let object, !ObjectReference.isValid(object) { throw ValidationError("--object: neither an object ID (UUID) nor the start of one (at least 4 hex digits): \(object)") }
    }

    func run() throws {
        let files = try StoreFiles(store)
        let cutoff = until.flatMap(Cutoff.init(argument:))
        let progress = Progress("replay", total: files.segmentBytes())
        if let object {
            let id = try ObjectReference.resolve(object, in: files)
            let history = try ObjectHistory.run(files, object: id, until: cutoff, progress: progress)
            print(json ? try JSONOutput.string(history) : history.text)
        } else {
            let state = try ReplayState.run(files, until: cutoff ?? .position(.max), entity: entity, progress: progress)
            print(json ? try JSONOutput.string(state) : state.text)
        }
    }
}

/// `strata diff STORE_A STORE_B [--html FILE]`, or `strata diff STORE --server URL --zone NAME`:
/// exit 0 when equal, 1 when they differ.
struct DiffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Compare two device stores, or a store with a zone on a server: events each lacks, events both hold with different content, the first divergent event, differing fields and who set them.",
        discussion: """
        Exit 0 when equal, 1 when they differ. With --server and --zone, the store is compared with the zone by digests of ranges of both histories, bisected down to the differing events, then by digests of object ID ranges of both states, down to the objects held otherwise: neither history nor any value is sent (a few kilobytes, whatever their size). The zone's side is known by fingerprints and HLCs only: the first divergent event is named whichever side holds it, and the events and objects shown in full are the device's (objects only in the zone by ID). A device with a download mask is compared by history only.
        """
    )

    @Argument(help: "The first store (A), or the device's store with --server.")
    var storeA: String

    @Argument(help: "The second store (B). Not with --server.")
    var storeB: String?

    @Option(help: "Compare the store with a zone on this server (its base URL) instead of with a second store.")
    var server: String?

    @Option(help: "With --server: the zone to compare with.")
    var zone: String?

    @Option(help: "With --server: the zone's owner, when it is another user's zone.")
    var owner: String?

    @Option(help: "With --server: a file holding the bearer token (its first line); without it (or --token), STRATA_TOKEN.")
    var tokenFile: String?

    @Option(help: "With --server: the bearer token (visible in `ps`: prefer --token-file).")
    var token: String?

    @Option(help: "With --server: trust the server's certificate through this PEM file.")
    var caFile: String?

    @Option(help: ArgumentHelp("With --server: the download mask to compare with (what the zone looks like to a device with that mask). Default: the one the store syncs with (its download-masks.json).", valueName: "MASK"))
    var omit: String?

    @Option(help: "Also write a self-contained HTML page with both timelines side by side (two stores).")
    var html: String?

    @Option(help: "List at most this many missing events per side (per replica for events with different content; with --server, also the objects held otherwise).")
    var limit: Int = 1000

    @Flag(help: "Compare every object, not only those the differing events can reach (two stores).")
    var full = false

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func validate() throws {
        if limit < 1 { throw ValidationError("--limit must be at least 1") }
        if let server {
            guard URL(string: server)?.scheme?.hasPrefix("http") == true else { throw ValidationError("--server must be an http(s) URL, got \(server)") }
            guard storeB == nil else { throw ValidationError("give one store with --server (the zone is the other side), not two") }
            guard zone != nil else { throw ValidationError("--server needs --zone: the zone to compare the store with") }
            guard html == nil, !full else { throw ValidationError("--html and --full compare two stores; not with --server") }
        } else {
            guard storeB != nil else { throw ValidationError("give two stores, or one store with --server and --zone") }
            guard zone == nil, owner == nil, tokenFile == nil, token == nil, caFile == nil, omit == nil else {
                throw ValidationError("--zone, --owner, --token-file, --token, --ca-file and --omit go with --server")
            }
        }
    }

    func run() async throws {
        if let server, let zone { return try await diffRemote(server: server, zone: zone) }
        guard let storeB else { throw CLIError("give two stores, or one store with --server and --zone") }
        let a = try StoreFiles(storeA)
        let b = try StoreFiles(storeB)
        let progress = Progress("diff", total: a.segmentBytes() + b.segmentBytes())
        let diff = try StoreDiff.run(storeA, storeB, limit: limit, full: full, progress: progress)
        print(json ? try diff.json : diff.text)
        if let html {
            do {
                try Data(diff.html.utf8).write(to: URL(fileURLWithPath: html))
            } catch {
                throw CLIError("cannot write \(html): \(error)")
            }
            if !json { print("wrote \(html)") }
        }
        if !diff.equal { throw ExitCode(ExitStatus.finding) }
    }

    /// The download mask the store recorded (`nil`: none); refused when its sync engines recorded
    /// different ones (which to compare with would be a guess) or the file is damaged.
    static func recordedMask(_ store: String) throws -> String? {
        guard let data = FileManager.default.contents(atPath: store + "/download-masks.json") else { return nil }
        guard let file = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let masks = file["masks"] as? [String: String] else {
            throw CLIError("\(store)/download-masks.json does not read: give the mask to compare with by --omit")
        }
        let distinct = Set(masks.values)
        guard distinct.count <= 1 else {
            throw CLIError("\(store) syncs with several download masks (\(distinct.sorted().joined(separator: "; "))): give the one to compare with by --omit")
        }
        return distinct.first.flatMap { $0.isEmpty ? nil : $0 }
    }

    private func diffRemote(server: String, zone: String) async throws {
        let credentials = try SyncToken.resolve(option: token, file: tokenFile)
        var mask = DownloadMask.none
        // Without --omit, the mask the store syncs with (what it holds is what that mask let in).
        let omit = try self.omit ?? Self.recordedMask(storeA)
        if let omit {
            do {
                mask = try DownloadMask(parsing: omit)
            } catch {
                throw CLIError("--omit: \((error as? StoreError)?.message ?? "\(error)")")
            }
        }
        guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
        // A client of its own (trusting only --ca-file) is shut down before the command ends.
        let client = try caFile.map(SyncCommand.client(trusting:)) ?? HTTPSyncTransport.defaultClient
        let files = try StoreFiles(storeA)
        let progress = Progress("diff", total: files.segmentBytes())
        let diff: RemoteDiff
        do {
            diff = try await RemoteDiff.run(storeA, transport: HTTPSyncTransport(server: url, bearer: credentials, client: client),
                                            zone: ZoneReference(zone, owner: owner), mask: mask, limit: limit, progress: progress)
            if caFile != nil { try await client.shutdown() }
        } catch {
            if caFile != nil { try? await client.shutdown() }
            if let error = error as? SyncError {
                throw CLIError("comparing \(storeA) with zone \(ZoneReference(zone, owner: owner)) on \(server): \(error)")
            }
            throw error
        }
        print(json ? try JSONOutput.string(diff) : diff.text)
        if !diff.equal { throw ExitCode(ExitStatus.finding) }
    }
}
