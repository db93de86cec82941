import Foundation
import Strata
import StrataSync
import StrataProtocol
import Synchronization
import StrataCore

/// The protocol's rules without HTTP, for unit tests of the engine's logic (the end-to-end tests
/// use the real server on a real port): one zone log, exactly-once pushes, sequence gaps, pages.
final class InMemoryTransport: SyncTransport {
    struct Zone {
        var log: [[UInt8]] = []
        var acknowledged: [ReplicaID: UInt64] = [:]
    }

    let zones = Mutex<[String: Zone]>([:])
    /// Counts the pushes that appended something, for exactly-once checks.
    let appends = Atomic<Int>(0)

    func ensureZone(_ reference: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        let zone = reference.description
        try zones.withLock {
            if $0[zone] == nil {
                guard create else { throw SyncError(.zoneNotFound, zone, status: 404) }
                $0[zone] = Zone()
            }
        }
        return ZoneAccessInfo(canPush: true)
    }

    func push(zone reference: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        let zone = reference.description
        let decoded = try transactions.map { try TransactionRecord(decoding: $0) }
        return try zones.withLock { zones in
            guard var z = zones[zone] else { throw SyncError(.zoneNotFound, zone, status: 404) }
            var appended = false
            for (bytes, transaction) in zip(transactions, decoded) {
                guard let range = transaction.sequences else { continue }
                let held = z.acknowledged[transaction.replica] ?? 0
                if range.upperBound <= held { continue }
                guard range.lowerBound == held + 1 else {
                    throw SyncError(.sequenceGap, "expected \(held + 1)", status: 409, expectedSequence: held + 1)
                }
                z.log.append(bytes)
                z.acknowledged[transaction.replica] = range.upperBound
                appended = true
            }
            if appended { appends.add(1, ordering: .relaxed) }
            zones[zone] = z
            return PushAnswer(token: String(z.log.count), acknowledged: decoded.first.flatMap { z.acknowledged[$0.replica] } ?? 0)
        }
    }

    func pull(zone reference: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        let zone = reference.description
        return try zones.withLock { zones in
            guard let z = zones[zone] else { throw SyncError(.zoneNotFound, zone, status: 404) }
            let start = token.flatMap(Int.init) ?? 0
            let end = min(z.log.count, start + limit)
            return PullResult(transactions: Array(z.log[start..<end]), nextToken: String(end), moreComing: end < z.log.count)
        }
    }

    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { nil }

    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] {
        zones.withLock { $0[zone.description]?.acknowledged.map { ReplicaAuthor(replica: $0.key, user: nil, acknowledged: $0.value) } ?? [] }
    }

    /// The in-memory log keeps no states: healing is tested against the real server.
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        throw SyncError(.badRequest, "the in-memory transport does not merge states", status: 400)
    }
}
