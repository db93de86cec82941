import Strata
import StrataCore

extension Inspection {
    /// A replica whose user the store knows, with the sequences it holds of it.
    struct Author: Codable, Sendable {
        var replica: String
        var user: String
        /// As in ``Replica/sequences`` (`none`: the store knows the user, not yet any event).
        var sequences: String
        var count: UInt64
    }

    static func authors(_ known: Authors, replicas: [Replica]) -> [Author] {
        let held = Dictionary(replicas.map { ($0.replica, $0) }, uniquingKeysWith: { first, _ in first })
        return known.users.keys.sorted().compactMap { id -> Author? in
            guard let user = known.user(id) else { return nil }
            let replica = held[id.description]
            return Author(replica: id.description, user: user, sequences: replica?.sequences ?? "none", count: replica?.count ?? 0)
        }
    }

    var authorsLines: [String] {
        var lines = ["authors"]
        for a in authors {
            lines.append("  \(a.replica)  \(a.user)  holds \(a.count) events: \(a.sequences)")
        }
        if let authorsWarning {
            lines.append("  (\(authorsWarning))")
        } else if authors.isEmpty {
            lines.append("  (none recorded: the store has not learned from a log server who pushed its replicas)")
        }
        return lines
    }
}
