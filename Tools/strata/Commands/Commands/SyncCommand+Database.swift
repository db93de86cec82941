import AsyncHTTPClient
import Foundation
@_spi(StrataInternals) import Strata
import StrataSync
import StrataSyncAsyncHTTPClient

/// `strata sync DATABASE`: every zone of a database with one ``DatabaseSyncEngine`` (or one zone,
/// through its engine).
extension SyncCommand {
    func syncDatabase(_ layout: DatabaseLayout, client: HTTPClient) async throws {
        var selected: ZoneReference?
        if let zone {
            guard let reference = ZoneTargets.reference(zone) else { throw CLIError("--zone: neither NAME nor OWNER/NAME: \(zone)") }
            selected = owner.map { ZoneReference(reference.name, owner: $0) } ?? reference
        } else if owner != nil {
            throw CLIError("--owner names the owner of the zone --zone names; alone it means nothing for a database")
        }
        if selected == nil && (watch || fromScratch || recreateZone) {
            throw CLIError("--watch, --from-scratch and --recreate-zone on a database need --zone (one zone's engine)")
        }
        if let selected, !layout.zones.contains(where: { $0.zone == selected }) {
            throw CLIError("--zone \(selected): the database \(store) holds no such zone (zones: \(layout.zones.map(\.zone.description).joined(separator: ", ")))")
        }
        let credentials = try SyncToken.resolve(option: token, file: tokenFile)
        guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
        let mask = try downloadMask()
        var options = DatabaseSyncOptions()
        // The mask is of the zone --zone names, or of every zone.
        let only = selected
        if !mask.isEmpty { options.downloadMask = { zone in only == nil || zone == only ? mask : .none } }
        let database = try await openDatabase(layout)
        let engine = DatabaseSyncEngine(database: database, transport: HTTPSyncTransport(server: url, bearer: credentials, client: client),
                                        server: url.absoluteString, options: options)
        var output = DatabaseSyncJSON(database: store)
        var failure: String?
        do {
            if let selected {
                let zoneEngine = try await engine.engine(for: selected)
                let report = try await syncAsAsked(zoneEngine)
                if !report.finished { output.finished = false }
                output.zones[selected.description] = SyncReportJSON(zone: selected, mode: mode, report: report,
                                                                    pending: await pendingCount(database, selected, zoneEngine))
            } else {
                let report: DatabaseSyncReport
                if let budget {
                    report = try await engine.syncOnce(within: budget)
                } else {
                    report = try await engine.sync()
                }
                if !report.finished {
                    output.finished = false
                    output.unfinishedZones = report.unfinishedZones.map { $0.description }.sorted()
                }
                for (zone, zoneReport) in report.zones {
                    let zoneEngine = try? await engine.engine(for: zone)
                    let pending = await zoneEngine.asyncMap { await pendingCount(database, zone, $0) } ?? nil
                    output.zones[zone.description] = SyncReportJSON(zone: zone, mode: mode, report: zoneReport, pending: pending)
                }
                for (zone, error) in report.failures { output.failures[zone.description] = SyncReportJSON.ErrorJSON(error) }
                output.added = report.added.map(\.description).sorted()
                output.removed = report.removed.map { .init(zone: $0.zone.description, reason: $0.reason.rawValue, unpushedEdits: $0.unpushedEdits,
                                                            store: database.path(of: $0)) }
                output.pendingShares = report.pendingShares.map(\.description).sorted()
                output.token = await engine.databaseToken
            }
        } catch {
            let described = (error as? SyncError).map(SyncReportJSON.ErrorJSON.init)
                ?? SyncReportJSON.ErrorJSON(code: SyncError.Code.store.name, message: "\(error)")
            output.error = described
            failure = "sync of the database \(store) with \(server) failed: \(error)"
        }
        output.ok = failure == nil && output.failures.isEmpty
        if json {
            emit(try JSONOutput.string(output, pretty: !watch))
        } else {
            for (zone, report) in output.zones.sorted(by: { $0.key < $1.key }) {
                emit("\(zone): pushed \(report.pushedTransactions) transaction(s), pulled \(report.pulledTransactions) (\(report.appliedEvents ?? 0) new event(s)); token \(report.token ?? "-")")
            }
            for zone in output.added { emit("added \(zone)") }
            for removed in output.removed {
                emit("removed \(removed.zone) (\(removed.reason)): kept aside in \(removed.store) with \(removed.unpushedEdits) unpushed edit(s)")
            }
            for zone in output.pendingShares { emit("shared with you, waiting to be accepted: \(zone) (strata share accept)") }
            if !output.finished {
                emit("the time was up: \(output.unfinishedZones.isEmpty ? "some zones" : output.unfinishedZones.joined(separator: ", ")) not finished; the next sync goes on from here")
            }
            for (zone, error) in output.failures.sorted(by: { $0.key < $1.key }) { emit("\(zone): failed: \(error.code): \(error.message)") }
        }
        if failure == nil, let selected, watch {
            let zoneEngine = try await engine.engine(for: selected)
            await zoneEngine.start()
            for await status in await zoneEngine.statusUpdates() {
                emit(json ? try JSONOutput.string(SyncStatusJSON(status), pretty: false)
                     : "\(status.phase.rawValue): pending \(status.pending), pushed \(status.pushed), pulled \(status.pulled)" + (status.lastError.map { ", last error: \($0)" } ?? ""))
            }
        }
        try? await database.close()
        if let failure { throw CLIError(failure) }
        if !output.failures.isEmpty {
            throw CLIError("sync of the database \(store) with \(server): \(output.failures.count) zone(s) failed: "
                           + output.failures.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.message)" }.joined(separator: "; "))
        }
    }

    /// The database, opened with the schema its default zone recorded (new zones a sync adds get it too).
    private func openDatabase(_ layout: DatabaseLayout) async throws -> Database {
        let schemaSource = layout.zones.first(where: { $0.zone == layout.defaultZone }) ?? layout.zones.first
        guard let schemaSource else { throw CLIError("the database \(store) holds no zone") }
        let schema: Schema
        do {
            let zoneStore = try Store.open(at: schemaSource.path)
            schema = zoneStore.schema
            try await zoneStore.close()
        } catch {
            throw CLIError("cannot read the schema of zone \(schemaSource.zone) of \(store): \(error)")
        }
        do {
            return try await Database.open(at: store, schema: schema, defaultZone: layout.defaultZone)
        } catch {
            throw CLIError("cannot open the database \(store): \(error)")
        }
    }

    private func pendingCount(_ database: Database, _ zone: ZoneReference, _ engine: SyncEngine) async -> Int? {
        guard let zoneStore = database.store(for: zone) else { return nil }
        return await pendingCount(zoneStore, engine)
    }
}

extension Optional {
    /// The wrapped value transformed by an async function.
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async -> T) async -> T? {
        guard let self else { return nil }
        return await transform(self)
    }
}

/// What `strata sync DATABASE --json` prints (the keys are listed in `strata sync --help`).
struct DatabaseSyncJSON: Encodable {
    var database: String
    var ok = false
    /// Each zone synced, by NAME (own) or OWNER/NAME, with the keys of ``SyncReportJSON``.
    var zones: [String: SyncReportJSON] = [:]
    var failures: [String: SyncReportJSON.ErrorJSON] = [:]
    var added: [String] = []
    var removed: [Removed] = []
    var pendingShares: [String] = []
    /// The database token the engine keeps (absent when one zone was synced, or before any answer).
    var token: String?
    /// Why the whole sync failed (the server could not say what changed); absent otherwise.
    var error: SyncReportJSON.ErrorJSON?
    /// `false` when `--within`'s time was up first; then the zones not finished.
    var finished = true
    var unfinishedZones: [String] = []

    init(database: String) { self.database = database }

    struct Removed: Encodable {
        var zone: String
        var reason: String
        var unpushedEdits: Int
        var store: String
    }
}
