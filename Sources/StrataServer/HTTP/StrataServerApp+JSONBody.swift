import Foundation
import StrataProtocol

extension StrataServerApp {
    /// A JSON request body as `T`: refused `400 badRequest` when a key appears twice (which value
    /// counts would be a guess) or when it does not decode, the message naming the shape expected
    /// (`shape`) and what did not fit.
    static func decodeJSONBody<T: Decodable>(_ body: [UInt8], as type: T.Type, shape: String) throws(ServerError) -> T {
        if let problem = DuplicateJSONKeys.first(in: body) {
            throw ServerError(.badRequest, "the body \(problem): which value counts would be a guess")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch {
            throw ServerError(.badRequest, "the body is not \(shape): \(describe(error))")
        }
    }
}
