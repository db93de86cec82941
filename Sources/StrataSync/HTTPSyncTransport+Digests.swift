import Foundation
public import StrataCore
import StrataProtocol

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
    private var epochSeen: UInt64?
    private var sent = 0
    private var received = 0
    private var posts = 0
    private var held: [ReplicaID: UInt64] = [:]

    init(transport: HTTPSyncTransport, zone: ZoneReference, mask: DownloadMask, replica: ReplicaID?) {
        self.transport = transport
        self.zone = zone
        self.mask = mask
        self.replica = replica
    }

    /// Bytes of request bodies sent and of answers received so far.
    public var bytes: (sent: Int, received: Int) { lock.withLock { (sent, received) } }

    /// The highest sequence of each replica the zone holds, its snapshot included (from the held
    /// ranges' answer; a server older than the field gives none).
    public var acknowledged: [ReplicaID: UInt64] { lock.withLock { held } }

    /// Requests sent so far (the held ranges' included).
    public var requests: Int { lock.withLock { posts } }

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
        var acknowledged: [ReplicaID: UInt64] = [:]
        for held in answer.replicas {
            guard let id = ReplicaID(held.replica) else {
                throw SyncError(.malformedResponse, "digests answer names \"\(held.replica.prefix(64))\", not a replica ID")
            }
            acknowledged[id] = held.acknowledged
            switch DigestQuestion.ranges(held.ranges) {
            case .success(let parsed) where !parsed.isEmpty: ranges[id] = parsed
            case .success: break
            case .failure(let problem): throw SyncError(.malformedResponse, "digests answer for replica \(id): \(problem.message)")
            }
        }
        lock.withLock {
            epochSeen = answer.epoch
            held = acknowledged
            posts += 1
        }
        return ranges
    }

    /// One round's answers. A round larger than a server answers at once (`DigestQuestions`'
    /// bounds) is sent as several requests, its questions cut into smaller ones of the same kind
    /// and their answers put back together.
    public func answer(_ requests: [DigestBisection.Request]) async throws -> [DigestBisection.Answer] {
        guard let epoch = lock.withLock({ epochSeen }) else {
            throw SyncError(.malformedResponse, "digest questions asked before the zone's held ranges")
        }
        // Each request as questions within one question's bounds, remembering whose they are.
        var parts: [(owner: Int, question: DigestBisection.Request)] = []
        for (owner, request) in requests.enumerated() {
            for part in Self.cut(request) { parts.append((owner, part)) }
        }
        var digests = [[DigestSum]](repeating: [], count: requests.count)
        var prints = [[SequenceFingerprint]](repeating: [], count: requests.count)
        var start = 0
        while start < parts.count {
            // As many questions as fit one round's bounds.
            var end = start
            var pieces = 0
            var ranges = 0
            var fingerprints: UInt64 = 0
            while end < parts.count && end - start < DigestQuestions.maxQuestions {
                let (p, r, f) = Self.size(parts[end].question)
                if end > start && (pieces + p > DigestQuestions.maxRoundPieces || ranges + r > DigestQuestions.maxRoundRanges
                                   || fingerprints + f > UInt64(DigestQuestions.maxFingerprints)) { break }
                pieces += p
                ranges += r
                fingerprints += f
                end += 1
            }
            let batch = Array(parts[start..<end])
            let answers = try await send(batch.map(\.question), epoch: epoch)
            for ((owner, _), answer) in zip(batch, answers) {
                switch answer {
                case .digests(let sums): digests[owner] += sums
                case .fingerprints(let found): prints[owner] += found
                }
            }
            start = end
        }
        return requests.enumerated().map { index, request in
            if case .digests = request { return .digests(digests[index]) }
            return .fingerprints(prints[index])
        }
    }

    /// `request` as questions each within `DigestQuestions`' bounds for one question.
    static func cut(_ request: DigestBisection.Request) -> [DigestBisection.Request] {
        switch request {
        case .digests(let replica, let pieces):
            var out: [DigestBisection.Request] = []
            var current: [[Range<UInt64>]] = []
            var ranges = 0
            for piece in pieces {
                if !current.isEmpty && (current.count == DigestQuestions.maxPieces || ranges + piece.count > DigestQuestions.maxRanges) {
                    out.append(.digests(replica, pieces: current))
                    current = []
                    ranges = 0
                }
                current.append(piece)
                ranges += piece.count
            }
            if !current.isEmpty { out.append(.digests(replica, pieces: current)) }
            return out
        case .fingerprints(let replica, let ranges):
            // At most maxRanges ranges and maxFingerprints sequences a question (a long range cut).
            var out: [DigestBisection.Request] = []
            var current: [Range<UInt64>] = []
            var room = UInt64(DigestQuestions.maxFingerprints)
            for range in ranges {
                var low = range.lowerBound
                while low < range.upperBound {
                    if current.count == DigestQuestions.maxRanges || room == 0 {
                        out.append(.fingerprints(replica, ranges: current))
                        current = []
                        room = UInt64(DigestQuestions.maxFingerprints)
                    }
                    let take = min(room, range.upperBound - low)
                    current.append(low..<low + take)
                    low += take
                    room -= take
                }
            }
            if !current.isEmpty { out.append(.fingerprints(replica, ranges: current)) }
            return out
        }
    }

    /// A question's pieces, ranges and (at most) fingerprints.
    static func size(_ request: DigestBisection.Request) -> (Int, Int, UInt64) {
        switch request {
        case .digests(_, let pieces): (pieces.count, pieces.reduce(0) { $0 + $1.count }, 0)
        case .fingerprints(_, let ranges): (0, ranges.count, ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound) })
        }
    }

    private func send(_ requests: [DigestBisection.Request], epoch: UInt64) async throws -> [DigestBisection.Answer] {
        let body = Array(try JSONEncoder().encode(DigestQuestions(epoch: epoch, questions: requests.map(DigestQuestion.init))))
        let request = HTTPExchangeRequest(method: "POST", url: transport.url(zone, StrataEndpoint.digests, query: query),
                                          headers: [("Content-Type", "application/json")], body: body)
        let answer = try await transport.send(request).body
        lock.withLock {
            sent += body.count
            received += answer.count
            posts += 1
        }
        guard let decoded = try? JSONDecoder().decode(DigestAnswers.self, from: Data(answer)), decoded.answers.count == requests.count else {
            throw SyncError(.malformedResponse, "digest answers are not {answers: [...]} with one answer per question: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        return try zip(decoded.answers, requests).map { wire, request in
            switch (wire.answer(), request) {
            case (.success(let answer), .digests(_, let pieces)):
                guard case .digests(let sums) = answer, sums.count == pieces.count else {
                    throw SyncError(.malformedResponse, "a digest answer does not answer its question (\(pieces.count) pieces)")
                }
                return answer
            case (.success(let answer), .fingerprints):
                guard case .fingerprints = answer else { throw SyncError(.malformedResponse, "a fingerprint question was answered with digests") }
                return answer
            case (.failure(let problem), _):
                throw SyncError(.malformedResponse, "digest answer: \(problem.message)")
            }
        }
    }

    /// The zone's life the held ranges were answered in (`nil` before).
    public var epoch: UInt64? { lock.withLock { epochSeen } }
}

extension HTTPSyncTransport {
    /// A zone on this server as the other side of a state comparison (`StateBisection`): what a
    /// device compares its objects with, without downloading the zone. `epoch` is the zone's life
    /// the comparison is in (``RemoteZoneDigests/epoch``, or the zone's description): a zone
    /// deleted and created again meanwhile answers `zoneReset`.
    public func zoneStateDigests(_ zone: ZoneReference, epoch: UInt64) -> RemoteZoneState {
        RemoteZoneState(transport: self, zone: zone, epoch: epoch)
    }
}

/// A zone's state by object across the network: `POST /v1/zones/{zone}/state-digests`. The first
/// answer names the position and generation the state is of (the zone's end then); every later
/// round asks about that same state, so
/// that the comparison is of one state while the zone moves on (a device state merged into the
/// zone meanwhile is refused `tokenExpired`).
public final class RemoteZoneState: @unchecked Sendable {
    private let transport: HTTPSyncTransport
    private let zone: ZoneReference
    private let epoch: UInt64
    private let lock = NSLock()
    private var pinned: (position: UInt64, generation: UInt64)?
    private var sent = 0
    private var received = 0

    init(transport: HTTPSyncTransport, zone: ZoneReference, epoch: UInt64) {
        self.transport = transport
        self.zone = zone
        self.epoch = epoch
    }

    /// The position of the zone's state being compared (`nil` before the first answer).
    public var position: UInt64? { lock.withLock { pinned?.position } }

    /// Bytes of request bodies sent and of answers received so far.
    public var bytes: (sent: Int, received: Int) { lock.withLock { (sent, received) } }

    /// One round's answers, in order.
    public func answer(_ requests: [StateBisection.Request]) async throws -> [StateBisection.Answer] {
        let pin = lock.withLock { pinned }
        let body = Array(try JSONEncoder().encode(StateDigestQuestions(epoch: epoch, position: pin?.position, generation: pin?.generation,
                                                                       questions: requests.map(StateDigestQuestion.init))))
        let request = HTTPExchangeRequest(method: "POST", url: transport.url(zone, StrataEndpoint.stateDigests),
                                          headers: [("Content-Type", "application/json")], body: body)
        let answer = try await transport.send(request).body
        guard let decoded = try? JSONDecoder().decode(StateDigestAnswers.self, from: Data(answer)), decoded.answers.count == requests.count else {
            throw SyncError(.malformedResponse, "state digest answers are not {position, answers: [...]} with one answer per question: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        if let pin, decoded.position != pin.position || decoded.generation != pin.generation {
            throw SyncError(.malformedResponse, "the state digests answered are of position \(decoded.position) and generation \(decoded.generation), not \(pin.position) and \(pin.generation) as asked")
        }
        lock.withLock {
            pinned = (decoded.position, decoded.generation)
            sent += body.count
            received += answer.count
        }
        return try zip(decoded.answers, requests).map { wire, request in
            switch (wire.answer(), request) {
            case (.success(let answer), .digests(let ranges)):
                guard case .digests(let sums) = answer, sums.count == ranges.count else {
                    throw SyncError(.malformedResponse, "a state digest answer does not answer its question (\(ranges.count) ranges)")
                }
                return answer
            case (.success(let answer), .objects):
                guard case .objects = answer else { throw SyncError(.malformedResponse, "an object question was answered with digests") }
                return answer
            case (.failure(let problem), _):
                throw SyncError(.malformedResponse, "state digest answer: \(problem.message)")
            }
        }
    }

    /// Compares `local` with the zone's state: the objects that differ, exist only on the device,
    /// or only in the zone.
    public func compare(_ local: StateDigests, limit: Int = 1_000) async throws -> StateBisection.Outcome {
        var bisection = StateBisection(local: local, limit: limit)
        while case let requests = bisection.nextRequests(), !requests.isEmpty {
            try bisection.receive(try await answer(requests))
        }
        return bisection.outcome
    }
}
