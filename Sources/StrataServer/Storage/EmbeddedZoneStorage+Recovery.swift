import Foundation
import StrataCore
import StrataProtocol
import StrataLog
import Logging

/// Opening the zones' logs and rebuilding what is kept in memory (ledgers, history chain)
/// from them, on open and after a log failed.
extension EmbeddedZoneStorage {
    /// Reads the catalog and opens every zone's log into `states` (which holds what was opened so
    /// far when this throws), then removes orphaned zone directories.
    static func openZones(in directory: String, options: Options, logger: Logger,
                                  into states: inout [ZoneID: ZoneState], keeping kept: inout [ZoneID: KeptRules]) throws(ZoneStorageError) {
        let catalogPath = DurableFile.join(directory, "zones.json")
        var infos: [ZoneInfo] = []
        if let bytes = try DurableFile.read(catalogPath) {
            let catalog: Catalog
            do {
                catalog = try JSONDecoder().decode(Catalog.self, from: Data(bytes))
            } catch {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) is damaged: \(error)")
            }
            // Format 1 has the same shape; its zone names were unique server-wide, which format 2
            // no longer requires (zones are named by owner and name).
            guard catalog.formatVersion == 1 || catalog.formatVersion == catalogVersion else {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) has format version \(catalog.formatVersion); this server reads 1 and \(catalogVersion)")
            }
            infos = catalog.zones
            for rules in catalog.deleted ?? [] where ZoneInfo.isValidName(rules.name) { kept[rules.id] = rules }
        }
        for info in infos {
            guard ZoneInfo.isValidName(info.name), states[info.id] == nil else {
                throw ZoneStorageError(.storageFailure, "\(catalogPath) names an invalid or duplicate zone \"\(info.id)\"")
            }
            var logOptions = options.log
            logOptions.create = false
            let path = logDirectory(in: directory, for: info)
            let log: SegmentLog
            do {
                log = try SegmentLog.open(at: path, options: logOptions)
            } catch {
                throw ZoneStorageError(.storageFailure, "cannot open the log of zone \(info.name) at \(path): \(error)", zone: info.name)
            }
            if let torn = log.recovery.tornTail {
                logger.warning("zone log had a torn tail; truncated", metadata: [
                    "zone": "\(info.name)", "segment": "\(torn.segment)", "droppedBytes": "\(torn.droppedBytes)",
                ])
            }
            do {
                let ledgers = try scanLedgers(log, directory: path, zone: info.id)
                states[info.id] = ZoneState(info: info, log: log, ledgers: ledgers, chain: chain(of: ledgers, log: log))
            } catch {
                // Opened a moment ago, nothing appended: released now (the initializer cannot wait).
                log.releaseUnwritten()
                throw error
            }
        }
        // Directories of zones that were being created or deleted when the process stopped.
        let expected = Set(infos.map { logDirectoryName(for: $0) })
        let zonesPath = DurableFile.join(directory, "zones")
        for name in try DurableFile.list(zonesPath) where !expected.contains(name) {
            logger.info("removing an orphaned zone directory", metadata: ["directory": "\(name)"])
            try DurableFile.removeTree(DurableFile.join(zonesPath, name))
        }
    }

    /// The zone's state, its log reopened first when an earlier append failed.
    func usableZone(_ name: ZoneID) async throws(ZoneStorageError) -> ZoneState {
        try checkOpen()
        guard let state = zoneStates[name] else { throw Self.notFound(name) }
        guard state.broken else { return state }
        if let recovery = recoveries[name] {
            await recovery.value
        } else {
            let epoch = state.info.epoch
            let recovery = Task { await self.recover(name, epoch: epoch) }
            recoveries[name] = recovery
            await recovery.value
        }
        try checkOpen()
        guard let recovered = zoneStates[name] else { throw Self.notFound(name) }
        guard !recovered.broken else {
            if let failure = recoveryFailures[name], failure.code == .storageFull { throw failure }
            throw ZoneStorageError(.storageFailure, "zone \(name): its log failed and could not be reopened (see the server log)", zone: name.description)
        }
        return recovered
    }

    func markBroken(_ name: ZoneID, epoch: UInt64, error: any Error) {
        guard zoneStates[name]?.info.epoch == epoch, zoneStates[name]?.broken == false else { return }
        logger.error("zone log failed; it is reopened on next use", metadata: ["zone": "\(name)", "error": "\(error)"])
        zoneStates[name]?.broken = true
    }

    /// Closes and reopens a failed log and rebuilds the zone's sequences from what is durable.
    func recover(_ name: ZoneID, epoch: UInt64) async {
        defer { recoveries[name] = nil }
        guard let state = zoneStates[name], state.info.epoch == epoch, state.broken else { return }
        try? await state.log.close()
        guard !closed, let current = zoneStates[name], current.info.epoch == epoch else { return }
        do {
            var logOptions = options.log
            logOptions.create = false
            let path = Self.logDirectory(in: directory, for: current.info)
            let log = try SegmentLog.open(at: path, options: logOptions)
            let ledgers = try Self.scanLedgers(log, directory: path, zone: name)
            let bytes = Self.measure(log)
            usage[name.owner, default: 0] += bytes - current.storedBytes
            zoneStates[name] = ZoneState(info: current.info, log: log, ledgers: ledgers, chain: Self.chain(of: ledgers, log: log), storedBytes: bytes)
            recoveryFailures[name] = nil
            logger.info("zone log reopened", metadata: ["zone": "\(name)", "end": "\(log.endPosition)"])
        } catch {
            recoveryFailures[name] = ZoneStorageError(Self.diskFull(error) ? .storageFull : .storageFailure,
                                                      "zone \(name): its log failed and could not be reopened: \(error)", zone: name.description)
            logger.error("zone log could not be reopened", metadata: ["zone": "\(name)", "error": "\(error)"])
        }
    }

    /// Every replica's ledger: owners from `replicas.json`, digests of retired transactions from
    /// `retired-digests`, and the rest from the log's entries. History retired by an older server
    /// (no digests kept) is summed up by the snapshot: its sequences count as held, unchecked.
    static func scanLedgers(_ log: SegmentLog, directory: String, zone: ZoneID) throws(ZoneStorageError) -> [ReplicaID: ReplicaLedger] {
        var ledgers: [ReplicaID: ReplicaLedger] = [:]
        for (replica, owner) in try ZoneLedgerFiles.loadOwners(in: directory, zone: zone) {
            ledgers[replica, default: ReplicaLedger()].owner = owner
        }
        let retired = try ZoneLedgerFiles.loadRetiredDigests(in: directory, zone: zone)
        for (replica, held) in retired?.held ?? [] { ledgers[replica, default: ReplicaLedger()].hold(held) }
        let snapshot = try? log.latestValidSnapshot().snapshot
        let builder = snapshot.flatMap { try? ProjectionBuilder(snapshot: $0.payload) }
        if log.startPosition > 0 && builder == nil {
            throw ZoneStorageError(.storageFailure, "zone \(zone): its history before position \(log.startPosition) was retired but no valid snapshot covers it", zone: zone.description)
        }
        if let snapshot, let builder {
            // The snapshot's applied sequences are the log's, plus what uploaders claimed for
            // their own replicas: those count as held (a push of them is checked as a fork).
            // History retired by an older server, whose digests were not kept, is held unchecked.
            let legacy = retired == nil || (retired?.cutoff ?? 0) < snapshot.info.position
            for (replica, contiguous) in builder.contiguousSequences() {
                if legacy && log.startPosition > 0 { ledgers[replica, default: ReplicaLedger()].uncheckedThrough = contiguous }
                ledgers[replica, default: ReplicaLedger()].acknowledged = max(ledgers[replica]?.acknowledged ?? 0, contiguous)
            }
        }
        do {
            var cursor = try log.records(from: log.startPosition)
            while let record = try cursor.next() {
                for entry in record.entries {
                    let header: TransactionHeader
                    do {
                        header = try TransactionHeader(decoding: entry.payload, position: entry.position)
                    } catch {
                        throw ZoneStorageError(.storageFailure, "zone \(zone): the transaction at position \(entry.position) does not decode: \(error)", zone: zone.description)
                    }
                    guard header.eventCount > 0 else { continue }
                    ledgers[header.replica, default: ReplicaLedger()].hold(HeldTransaction(
                        first: header.firstSequence, last: header.firstSequence + header.eventCount - 1,
                        position: entry.position, digest: TransactionDigest(of: entry.payload)))
                }
            }
        } catch let error as ZoneStorageError {
            throw error
        } catch {
            throw ZoneStorageError(.storageFailure, "zone \(zone): reading its log failed: \(error)", zone: zone.description)
        }
        return ledgers
    }

    /// The chain of the zone's history from the digests its ledgers hold (retired ones included),
    /// kept from the log's first position on.
    static func chain(of ledgers: [ReplicaID: ReplicaLedger], log: SegmentLog) -> HistoryChain {
        let end = log.endPosition
        let digests = ledgers.values.flatMap { ledger in
            ledger.transactions.lazy.filter { $0.position < end }.map { (position: $0.position, digest: $0.digest) }
        }
        return HistoryChain(digests: digests, end: end, keepingFrom: log.startPosition)
    }
}
