import Foundation
import Hummingbird
import Logging
import StrataCore
import StrataProtocol

/// The digest endpoints: a device compares its history with a zone's by exchanging digests of
/// ranges (``DigestBisection``), sending neither history. Whoever may read the zone may ask, with
/// its download mask (the digests are of what it may see), and is checked again before the answer
/// goes out (a grant revoked or a sign-in ended meanwhile gets no answer).
extension StrataServerApp {
    /// The largest body of a digest question round.
    static let maxDigestQuestionBytes = 1 << 20

    /// `GET /v1/zones/{zone}/digests`: the sequences of each replica the zone holds with content.
    func digestRanges(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let query = request.uri.queryParameters
        let digests = try await zoneDigests(zone, mask: try downloadMask(query.get(StrataQuery.omit)),
                                            puller: try pullingReplica(query.get(StrataQuery.replica)))
        // How far the zone holds each replica at all (its snapshot included): no user names.
        let held = try await storageCall { () async throws(ZoneStorageError) in try await storage.replicas(zone: zone.id) }
        let acknowledged = Dictionary(held.map { ($0.replica, $0.acknowledged) }, uniquingKeysWith: max)
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        let ids = Set(digests.replicas.keys).union(acknowledged.keys).sorted()
        let replicas = ids.map { ReplicaRanges(replica: $0, ranges: digests.replicas[$0]?.ranges ?? [], acknowledged: acknowledged[$0]) }
        return try json(ZoneDigestRanges(epoch: zone.epoch, replicas: replicas))
    }

    /// `POST /v1/zones/{zone}/digests`: one round of a bisection's questions, answered in order.
    func digestAnswers(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let query = request.uri.queryParameters
        let mask = try downloadMask(query.get(StrataQuery.omit))
        let puller = try pullingReplica(query.get(StrataQuery.replica))
        let body = try await readBody(request, limit: min(configuration.limits.maxBodyBytes, Self.maxDigestQuestionBytes))
        let requests = try Self.digestRequests(body, zone: zone)
        let digests = try await zoneDigests(zone, mask: mask, puller: puller)
        // Counted before they are made: an answer never holds more than the protocol allows.
        var fingerprints: UInt64 = 0
        for case .fingerprints(let replica, let ranges) in requests {
            fingerprints += digests.replicas[replica]?.digest(ranges).count ?? 0
        }
        guard fingerprints <= UInt64(DigestQuestions.maxFingerprints) else {
            throw ServerError(.badRequest, "the questions ask for \(fingerprints) fingerprints; one answer holds at most \(DigestQuestions.maxFingerprints): ask about fewer ranges")
        }
        let answers = requests.map { DigestAnswer(digests.answerNow($0)) }
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        return try json(DigestAnswers(answers: answers))
    }

    /// The questions of a round, read and bounded.
    static func digestRequests(_ body: [UInt8], zone: ZoneInfo) throws(ServerError) -> [DigestBisection.Request] {
        let questions = try decodeJSONBody(body, as: DigestQuestions.self,
                                           shape: "{\"epoch\": N, \"questions\": [{\"replica\": ID, \"pieces\": [[[first, end], …], …]} or {\"replica\": ID, \"fingerprints\": [[first, end], …]}]}")
        guard questions.epoch == zone.epoch else {
            throw ServerError(.zoneReset, "zone \(zone.id) is in epoch \(zone.epoch), not \(questions.epoch): it was deleted and created again since its digests were asked for")
        }
        guard !questions.questions.isEmpty, questions.questions.count <= DigestQuestions.maxQuestions else {
            throw ServerError(.badRequest, "a round asks 1 to \(DigestQuestions.maxQuestions) questions, not \(questions.questions.count)")
        }
        // The round's totals: a small body must not ask for a large answer.
        let pieces = questions.questions.reduce(0) { $0 + ($1.pieces?.count ?? 0) }
        let ranges = questions.questions.reduce(0) { $0 + $1.rangeCount }
        guard pieces <= DigestQuestions.maxRoundPieces, ranges <= DigestQuestions.maxRoundRanges else {
            throw ServerError(.badRequest, "a round asks about \(pieces) pieces and \(ranges) ranges; at most \(DigestQuestions.maxRoundPieces) and \(DigestQuestions.maxRoundRanges) are answered")
        }
        var requests: [DigestBisection.Request] = []
        for (index, question) in questions.questions.enumerated() {
            if let pieces = question.pieces, pieces.isEmpty || pieces.count > DigestQuestions.maxPieces {
                throw ServerError(.badRequest, "question \(index) asks about \(pieces.count) pieces; 1 to \(DigestQuestions.maxPieces) are answered")
            }
            if let pieces = question.pieces, pieces.contains(where: \.isEmpty) {
                throw ServerError(.badRequest, "question \(index) asks about a piece of no ranges")
            }
            guard question.rangeCount <= DigestQuestions.maxRanges else {
                throw ServerError(.badRequest, "question \(index) names \(question.rangeCount) ranges; at most \(DigestQuestions.maxRanges) are answered")
            }
            switch question.request() {
            case .success(let request): requests.append(request)
            case .failure(let problem): throw ServerError(.badRequest, "question \(index): \(problem.message)")
            }
        }
        return requests
    }

    /// The zone's digests as `mask` (for `puller`) sees it.
    private func zoneDigests(_ zone: ZoneInfo, mask: DownloadMask?, puller: ReplicaID?) async throws -> HistoryDigests {
        do {
            return try await digestCache.digests(zone: zone.id, epoch: zone.epoch, mask: mask, puller: puller)
        } catch let error as ZoneStorageError {
            throw answer(error)
        } catch let error as StoreError {
            logger.error("a zone's transaction does not decode", metadata: ["zone": "\(zone.id)", "error": "\(error)"])
            throw ServerError(.internalError, "zone \(zone.id): a transaction does not decode (\(error.message)); its digests cannot be computed")
        }
    }
}
