import Strata
import StrataCore

/// Which user pushed each replica's events, as a store recorded it from the log server
/// (`authors.json`), for the tools to show beside replicas. A display aid: when the file is
/// damaged the tools say so and show no users, and nothing else changes.
struct Authors: Sendable {
    private(set) var users: [ReplicaID: String] = [:]
    /// Why some store's users are not shown (its authors file is damaged or unreadable).
    private(set) var warnings: [String] = []

    init() {}

    /// The authors recorded in the store at `directory`.
    init(ofStoreAt directory: String) {
        do {
            users = try Store.authors(ofStoreAt: directory)
        } catch let error as StoreError {
            warnings = ["users are not shown for \(directory): \(error.message)"]
        } catch {
            warnings = ["users are not shown for \(directory): \(error)"]
        }
    }

    /// Both maps (for `diff`: either store may know a replica's user). A replica's user never
    /// changes, so the maps cannot disagree unless a file was edited: then the first one wins.
    func merged(with other: Authors) -> Authors {
        var result = self
        result.users.merge(other.users) { first, _ in first }
        result.warnings += other.warnings
        return result
    }

    func user(_ replica: ReplicaID) -> String? { users[replica] }

    /// The user of a replica given as its ID's text (as the tools' output structs hold it).
    func user(_ replica: String) -> String? { ReplicaID(replica).flatMap { users[$0] } }

    /// ` by alice`, or nothing when the user is not known.
    static func by(_ user: String?) -> String { user.map { " by \($0)" } ?? "" }
}
