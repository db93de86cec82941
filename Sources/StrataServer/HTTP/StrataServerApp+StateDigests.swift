import Foundation
import Hummingbird
import StrataCore
import StrataProtocol

/// The state digest endpoint: a device compares its objects with the zone's state by exchanging
/// digests of object ID ranges (``StateBisection``), sending no values. Whoever may read the zone
/// may ask, and is checked again before the answer goes out.
extension StrataServerApp {
    /// `POST /v1/zones/{zone}/state-digests`: one round of a state bisection's questions, about
    /// the zone's state at the position the questions name (the zone's end when they name none).
    func stateDigestAnswers(_ request: Request, _ context: StrataRequestContext) async throws -> Response {
        let (user, zone) = try context.readableZone()
        try Self.requireSchemaVersion(request, zone)
        let body = try await readBody(request, limit: min(configuration.limits.maxBodyBytes, Self.maxDigestQuestionBytes))
        let (questions, requests) = try Self.stateRequests(body, zone: zone)
        // A comparison is of one state: the generation pins it as the position does (a device
        // state merged into the zone replaces its state at a position without moving it).
        if let generation = questions.generation, generation != zone.generation {
            throw ServerError(.tokenExpired, "zone \(zone.id) merged a device's state since the comparison began (generation \(zone.generation), not \(generation)): compare again from the zone's end")
        }
        let end = try await storageCall { () async throws(ZoneStorageError) in try await storage.endPosition(zone: zone.id) }
        // No position named: the zone's end (a state kept there already answers at once).
        let position = questions.position ?? end
        guard position <= end else {
            throw ServerError(.zoneRewound, "zone \(zone.id) ends at position \(end), before \(position): it was restored from a backup since the comparison began; compare again from its end")
        }
        let state: StateDigests
        do {
            state = try await stateDigests.objects(zone: zone.id, epoch: zone.epoch, generation: zone.generation, at: position)
        } catch ZoneStateDigests.Unavailable.compacted(let snapshot) {
            throw ServerError(.tokenExpired, "zone \(zone.id) is compacted through position \(snapshot): its state at \(position) is no longer known; compare again from the zone's end")
        } catch ZoneStateDigests.Unavailable.behind(let kept) {
            throw ServerError(.serverBusy, "zone \(zone.id): the server keeps its state at position \(kept), past \(position), and replayed an older one lately; compare again from the zone's end")
        } catch let error as ZoneStorageError {
            throw ServerError(error)
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError(.internalError, "zone \(zone.id): its state at position \(position) cannot be computed: \(error)")
        }
        // Counted before they are made: an answer never holds more than the protocol allows.
        var objects = 0
        for case .objects(let ranges) in requests {
            objects += ranges.reduce(0) { $0 + state.count(in: $1) }
        }
        guard objects <= StateDigestQuestions.maxObjects else {
            throw ServerError(.badRequest, "the questions ask for \(objects) objects; one answer holds at most \(StateDigestQuestions.maxObjects): ask about narrower ranges")
        }
        let answers = requests.map { StateDigestAnswer(StateBisection.answer($0, from: state)) }
        try requireStillSignedIn(request, as: user)
        try await requireStillReadable(zone.id, by: user, epoch: zone.epoch)
        return try json(StateDigestAnswers(position: position, generation: zone.generation, answers: answers))
    }

    /// The questions of a round, read and bounded.
    static func stateRequests(_ body: [UInt8], zone: ZoneInfo) throws(ServerError) -> (StateDigestQuestions, [StateBisection.Request]) {
        let questions = try decodeJSONBody(body, as: StateDigestQuestions.self,
                                           shape: "{\"epoch\": N, \"position\": N (optional), \"generation\": N (optional), \"questions\": [{\"digests\": [[first, last], …]} or {\"objects\": [[first, last], …]}]}")
        guard questions.epoch == zone.epoch else {
            throw ServerError(.zoneReset, "zone \(zone.id) is in epoch \(zone.epoch), not \(questions.epoch): it was deleted and created again since the comparison began")
        }
        guard !questions.questions.isEmpty, questions.questions.count <= StateDigestQuestions.maxQuestions else {
            throw ServerError(.badRequest, "a round asks 1 to \(StateDigestQuestions.maxQuestions) questions, not \(questions.questions.count)")
        }
        var requests: [StateBisection.Request] = []
        for (index, question) in questions.questions.enumerated() {
            guard question.rangeCount >= 1, question.rangeCount <= StateDigestQuestions.maxRanges else {
                throw ServerError(.badRequest, "question \(index) names \(question.rangeCount) ranges; 1 to \(StateDigestQuestions.maxRanges) are answered")
            }
            switch question.request() {
            case .success(let request): requests.append(request)
            case .failure(let problem): throw ServerError(.badRequest, "question \(index): \(problem.message)")
            }
        }
        return (questions, requests)
    }
}
