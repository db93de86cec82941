import Strata
import StrataServer
import StrataProtocol
import Testing
import StrataCore

/// Found by the fuzz target fuzz-state-upload (Tools/Fuzz, through the snapshot decoder): the body
/// of `POST …/state` is a projection snapshot from the network, and one whose name table repeated
/// an entry trapped the server.
@Suite("The server's check of an uploaded state")
struct StateUploadDecodingTests {
    @Test("An uploaded state that repeats a name is answered as a bad request, and the server goes on")
    func repeatedNameIsBadRequest() throws {
        let empty = ProjectionBuilder().snapshotPayload()
        // The empty state with two names, both "Note" (the tables follow the version byte).
        let body = [empty[0], 2, 4] + Array("Note".utf8) + [4] + Array("Note".utf8) + [0] + empty[3...]
        let error = try #require(throws: ServerError.self) {
            try StateValidation.validate(Array(body), now: 1_780_000_000_000, maxClockOffset: .seconds(60))
        }
        #expect(error.code == .badRequest)
        #expect(error.message.contains("repeated name"))
        // The same state without the repetition is accepted.
        let valid = [empty[0], 1, 4] + Array("Note".utf8) + [0] + empty[3...]
        _ = try StateValidation.validate(Array(valid), now: 1_780_000_000_000, maxClockOffset: .seconds(60))
    }
}
