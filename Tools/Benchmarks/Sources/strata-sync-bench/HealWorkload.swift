// The heal workload: what it costs a device to heal a zone the server lost, next to what the
// zone's first upload cost. One device store, its own server child over its own data directory:
//
//   0. the device's first sync (its one schema transaction) creates the zone; the server is
//      stopped and its data directory copied ("the backup"), then restarted;
//   1. the device commits N inserts in transactions of `perTransaction` and syncs: the FIRST
//      UPLOAD (every transaction pushed, then pulled back);
//   2. the server is stopped, its data directory replaced by the backup and restarted on the same
//      port; the device syncs: the HEAL (410 zoneRewound → what the zone still holds pulled →
//      POST …/state of its whole state, claiming only its own history its log no longer holds →
//      what its log holds past that claim pushed, then pulled back; the upload names the zone's
//      end, so the merged snapshot is not downloaded);
//   3. the same with a copy of the device taken after 1, `compact()`ed before the heal, so its
//      own history is only in its state;
//   after 2 and 3 a fresh device syncs from the healed server and must end with the healing
//   device's digest and N objects (a mismatch fails the run).
import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog
import StrataSync

/// The devices' log segments: small, so that `compact()` retires nearly all of a device's history
/// (it never retires the segment being written, 64 MiB by default).
let healSegmentSize = 1 << 20

/// Every device here is opened with automatic compaction `.disabled`. With the default, the
/// healing device would compact every 100,000 of its 1 M inserts, so the first upload (the
/// baseline) would include background compactions, and the heal of row 4b would no longer differ
/// from the heal after an explicit `compact()` (row 4c), whose point is a log without the
/// device's history. The fresh devices of row 4d pull the healed zone's events past its snapshot
/// (all 1 M of them after 4b), so with the default they too would compact in the background
/// while they are timed, and no longer compare with the first upload and with earlier runs.
func openDevice(_ path: String, _ durability: Durability) async throws -> Store {
    var options = StoreOptions(durability: durability)
    options.segmentSize = healSegmentSize
    options.autoCompaction = .disabled
    return try await Store.open(at: path, schema: benchSchema, options: options)
}

/// One measured `sync()` of a store.
struct MeasuredSync {
    var report: SyncReport
    var wire = WireCounts()
    var nanos: UInt64 = 0
    var serverCPU = 0.0
    var clientCPU = 0.0

    var seconds: Double { Double(nanos) / 1e9 }
}

/// A `SyncEngine` over a fresh counting transport syncs `store` with `zone` once.
func measuredSync(_ store: Store, server: ServerProcess, zone: String) async throws -> MeasuredSync {
    let counting = CountingTransport(transport(server))
    let engine = try SyncEngine(store: store, transport: counting, zone: zone)
    let serverBefore = server.cpuSeconds()
    let clientBefore = processCPUSeconds()
    let start = monotonicNanos()
    let report = try await engine.sync()
    var run = MeasuredSync(report: report)
    run.nanos = monotonicNanos() - start
    run.serverCPU = server.cpuSeconds() - serverBefore
    run.clientCPU = processCPUSeconds() - clientBefore
    run.wire = counting.seen
    return run
}

/// A fresh device's catch-up from the healed zone, checked against the healing device.
struct FreshCheck {
    var sync: MeasuredSync
    var count = 0
    var digest = ""
    var expectedDigest = ""
    var digestMatches: Bool { digest == expectedDigest }
}

struct HealRun {
    var events = 0
    var perTransaction = 0
    var build = Sample()
    /// Transactions the zone held in the backup (the device's schema transaction).
    var backupTransactions = 0
    var backupBytes = 0
    var firstUpload: MeasuredSync
    var heal: MeasuredSync
    var healAfterCompaction: MeasuredSync
    var freshAfterHeal: FreshCheck
    var freshAfterCompactedHeal: FreshCheck
    /// The compacted copy: compact() time and the store's size on disk before and after.
    var compactNanos: UInt64 = 0
    var storeBytesBefore = 0
    var storeBytesAfter = 0
    /// The compacted copy's own transactions still in its log (of `build.operations + 1`).
    var ownTransactionsLeft = 0
    /// The device's digest before the heal and after it (the zone lost nothing the device lacked,
    /// so a heal must leave it unchanged).
    var deviceDigestBefore = ""
    var deviceDigestAfterHeal = ""
    var deviceDigestAfterCompactedHeal = ""
}

/// Runs the heal workload in `directory` (made here) with its own server child.
func healRun(in directory: String, events: Int, perTransaction: Int, keep: Bool) async throws -> HealRun {
    let zone = "heal"
    let fm = FileManager.default
    try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let serverData = directory + "/server"
    let backup = directory + "/server-backup"
    let devicePath = directory + "/device"
    let compactedPath = directory + "/device-compacted"

    var server = try ServerProcess.start(data: serverData, directory: directory)
    note("heal: server pid \(server.pid) on \(server.url.absoluteString), data in \(serverData)")
    do {
        /// Stops the server; copies its data directory to `saving`, or replaces it with a copy of
        /// `restoring`; starts it again on the same port.
        func restart(saving: String? = nil, restoring: String? = nil) throws {
            server.stop()
            if let saving { try fm.copyItem(atPath: serverData, toPath: saving) }
            if let restoring {
                try fm.removeItem(atPath: serverData)
                try fm.copyItem(atPath: restoring, toPath: serverData)
            }
            let port = server.port
            server = try ServerProcess.start(data: serverData, directory: directory, port: port)
            note("  server restarted: pid \(server.pid) on \(server.url.absoluteString)\(server.port == port ? "" : " (port \(port) was taken)")")
        }

        // 0. The zone is created by the device's first sync (its schema transaction); the backup
        // is taken then.
        var device = try await openDevice(devicePath, .buffered)
        let seed = try await measuredSync(device, server: server, zone: zone)
        try restart(saving: backup)
        let backupTransactions = seed.report.pushedTransactions
        let backupBytes = Machine.directorySize(backup)
        note("heal: zone \(zone) created with \(backupTransactions) transaction(s); server data copied (\(bytes(Double(backupBytes))))")

        // 1. First upload.
        note("heal: the device commits \(grouped(events)) inserts, \(perTransaction)/tx, buffered…")
        let build = try await insertItems(into: device, events: events, perTransaction: perTransaction)
        note("  \(rate(build.eventsPerSecond)) events/s; first upload of \(grouped(build.operations)) tx by sync()…")
        let first = try await measuredSync(device, server: server, zone: zone)
        note("  \(fixed(first.seconds, 2)) s, \(grouped(first.wire.requests)) requests, \(bytes(Double(first.wire.wireBytes))) on the wire; \(first.wire.failureText)")
        guard first.report.pushedTransactions == build.operations else {
            throw BenchError("the first upload pushed \(first.report.pushedTransactions) transactions, expected \(build.operations)")
        }
        let digestBefore = device.digest()
        // A copy of the device as it is now, for the compacted variant (closed, so the copy is whole).
        try await device.close()
        try fm.copyItem(atPath: devicePath, toPath: compactedPath)
        device = try await openDevice(devicePath, .buffered)

        // 2. The server loses the zone's history: back to the backup. The device heals it.
        try restart(restoring: backup)
        note("heal: the device syncs with the restored zone…")
        let heal = try await measuredSync(device, server: server, zone: zone)
        try checkHealed(heal, "heal")
        note("  \(fixed(heal.seconds, 2)) s, \(grouped(heal.wire.requests)) requests, \(bytes(Double(heal.wire.wireBytes))) on the wire; \(heal.wire.failureText)")
        let digestAfterHeal = device.digest()
        let fresh1 = try await freshDevice(at: directory + "/fresh-1", server: server, zone: zone,
                                           expectedDigest: digestAfterHeal, expectedCount: events)
        try await device.close()

        // 3. The same with the copy compacted first: its own history is only in its state.
        let compacted = try await openDevice(compactedPath, .buffered)
        let sizeBefore = Machine.directorySize(compactedPath)
        let compactStart = monotonicNanos()
        try await compacted.compact()
        let compactNanos = monotonicNanos() - compactStart
        let sizeAfter = Machine.directorySize(compactedPath)
        let ownInLog = try compacted.transactions(forSync: true).filter { $0.transaction.replica == compacted.replicaID }.count
        note("heal: the copy compacted in \(fixed(Double(compactNanos) / 1e9, 2)) s (\(bytes(Double(sizeBefore))) → \(bytes(Double(sizeAfter)))), \(ownInLog) own tx left in its log")
        try restart(restoring: backup)
        note("heal: the compacted copy syncs with the restored zone…")
        let healCompacted = try await measuredSync(compacted, server: server, zone: zone)
        try checkHealed(healCompacted, "heal after compaction")
        note("  \(fixed(healCompacted.seconds, 2)) s, \(grouped(healCompacted.wire.requests)) requests, \(bytes(Double(healCompacted.wire.wireBytes))) on the wire; \(healCompacted.wire.failureText)")
        let digestAfterCompactedHeal = compacted.digest()
        let fresh2 = try await freshDevice(at: directory + "/fresh-2", server: server, zone: zone,
                                           expectedDigest: digestAfterCompactedHeal, expectedCount: events)
        try await compacted.close()
        server.stop()

        var run = HealRun(firstUpload: first, heal: heal, healAfterCompaction: healCompacted,
                          freshAfterHeal: fresh1, freshAfterCompactedHeal: fresh2)
        run.events = events
        run.perTransaction = perTransaction
        run.build = build
        run.backupTransactions = backupTransactions
        run.backupBytes = backupBytes
        run.compactNanos = compactNanos
        run.storeBytesBefore = sizeBefore
        run.storeBytesAfter = sizeAfter
        run.ownTransactionsLeft = ownInLog
        run.deviceDigestBefore = digestBefore
        run.deviceDigestAfterHeal = digestAfterHeal
        run.deviceDigestAfterCompactedHeal = digestAfterCompactedHeal
        if !keep { try? fm.removeItem(atPath: directory) }
        return run
    } catch {
        server.stop()
        throw error
    }
}

/// A heal must have met the rewound zone and uploaded the device's state.
private func checkHealed(_ run: MeasuredSync, _ what: String) throws {
    guard run.report.rewinds >= 1, run.report.stateUploads >= 1 else {
        throw BenchError("\(what): sync() reported \(run.report.rewinds) rewind(s) and \(run.report.stateUploads) state upload(s); the restored zone was not healed (\(run.wire.failureText))")
    }
}

/// A fresh device (group commit) syncs the healed zone; its digest and object count are checked.
private func freshDevice(at path: String, server: ServerProcess, zone: String,
                         expectedDigest: String, expectedCount: Int) async throws -> FreshCheck {
    let store = try await openDevice(path, .groupCommit)
    let sync = try await measuredSync(store, server: server, zone: zone)
    var check = FreshCheck(sync: sync, expectedDigest: expectedDigest)
    check.count = store.count("Item")
    check.digest = store.digest()
    let pastSnapshot = store.historySinceSnapshot.events
    try await store.close()
    note("  fresh device: \(fixed(sync.seconds, 2)) s, \(bytes(Double(sync.wire.wireBytes))), \(grouped(check.count)) objects, \(grouped(pastSnapshot)) event(s) past its snapshot, digest " + (check.digestMatches ? "OK" : "DIFFERS"))
    return check
}
