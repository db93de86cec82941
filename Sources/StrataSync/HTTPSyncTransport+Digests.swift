import Foundation
public import StrataCore
public import StrataProtocol

extension HTTPSyncTransport {
    /// A zone on this server as one side of a digest comparison (`DigestBisection`): what a
    /// device compares its history with, without downloading the zone.
    ///
    /// - Parameters:
    ///   - zone: the zone.
    ///   - mask: the device's download mask: the zone's digests are of what the device may see.
    ///   - replica: the device's own replica (its own transactions are not masked).
    public func zoneDigests(_ zone: ZoneReference, omitting mask: DownloadMask = .none, replica: ReplicaID? = nil) -> RemoteZoneDigests {
        RemoteZoneDigests(transport: self, zone: zone, mask: mask, replica: replica)
    }
}

/// A zone's history digests across the network: `GET` and `POST /v1/zones/{zone}/digests`.
/// The first answer names the zone's life (epoch); a question sent after the zone was deleted
/// and created again is refused (`zoneReset`) rather than answered from the new zone.
public final class RemoteZoneDigests: HistoryDigestSource, @unchecked Sendable {
    private let transport: HTTPSyncTransport
    private let zone: ZoneReference
    private let mask: DownloadMask
    private let replica: ReplicaID?
    private let lock = NSLock()
    private var epoch: UInt64?
    private var sent = 0
    private var received = 0

    init(transport: HTTPSyncTransport, zone: ZoneReference, mask: DownloadMask, replica: ReplicaID?) {
        self.transport = transport
        self.zone = zone
        self.mask = mask
        self.replica = replica
    }

    /// Bytes of request bodies sent and of answers received so far.
    public var bytes: (sent: Int, received: Int) { lock.withLock { (sent, received) } }

    private var query: [(String, String)] {
        guard !mask.isEmpty else { return [] }
        return [(StrataQuery.omit, mask.description)] + (replica.map { [(StrataQuery.replica, $0.description)] } ?? [])
    }

    public func contentRanges() async throws -> [ReplicaID: [Range<UInt64>]] {
        let body = try await transport.send(HTTPExchangeRequest(method: "GET", url: transport.url(zone, StrataEndpoint.digests, query: query))).body
        lock.withLock { received += body.count }
        guard let answer = try? JSONDecoder().decode(ZoneDigestRanges.self, from: Data(body)) else {
            throw SyncError(.malformedResponse, "digests answer is not {epoch, replicas: [{replica, ranges}]}: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
        var ranges: [ReplicaID: [Range<UInt64>]] = [:]
        for held in answer.replicas {
            guard let id = ReplicaID(held.replica) else {
                throw SyncError(.malformedResponse, "digests answer names \"\(held.replica.prefix(64))\", not a replica ID")
            }
            switch DigestQuestion.ranges(held.ranges) {
            case .success(let parsed): ranges[id] = parsed
            case .failure(let problem): throw SyncError(.malformedResponse, "digests answer for replica \(id): \(problem.message)")
            }
        }
        lock.withLock { epoch = answer.epoch }
        return ranges
    }

    public func answer(_ requests: [DigestBisection.Request]) async throws -> [DigestBisection.Answer] {
        guard let epoch = lock.withLock({ epoch }) else {
            throw SyncError(.malformedResponse, "digest questions asked before the zone's held ranges")
        }
        let body = Array(try JSONEncoder().encode(DigestQuestions(epoch: epoch, questions: requests.map(DigestQuestion.init))))
        let request = HTTPExchangeRequest(method: "POST", url: transport.url(zone, StrataEndpoint.digests, query: query),
                                          headers: [("Content-Type", "application/json")], body: body)
        let answer = try await transport.send(request).body
        lock.withLock {
            sent += body.count
            received += answer.count
        }
        guard let decoded = try? JSONDecoder().decode(DigestAnswers.self, from: Data(answer)), decoded.answers.count == requests.count else {
            throw SyncError(.malformedResponse, "digest answers are not {answers: [...]} with one answer per question: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        return try decoded.answers.map { wire in
            switch wire.answer() {
            case .success(let answer): return answer
            case .failure(let problem): throw SyncError(.malformedResponse, "digest answer: \(problem.message)")
            }
        }
    }
}
