import Foundation
import Strata
import StrataCore

extension Inspection {
    /// A replica the store stopped authoring under (`store.json`'s lineage), oldest first.
    struct Fork: Codable, Sendable {
        /// `forked`, `logLost` or `clockRestamp`.
        var reason: String
        var replica: String
        /// Who pushed the abandoned replica, when known.
        var user: String?
        /// Its sequences 1…keptThrough stay; the later ones were abandoned.
        var keptThrough: UInt64
        /// The log position the re-authored transactions were stored at.
        var before: UInt64
        var successor: String
        /// Events re-authored under the successor (its sequences 1…reauthored).
        var reauthored: UInt64
        var date: String
    }

    /// The lineage recorded in the store's identity (`store.json`), as ``StoreFiles`` read it.
    static func lineage(_ files: StoreFiles, authors: Authors) -> [Fork] {
        (files.storeIdentity?.lineage ?? []).map { fork in
            Fork(reason: fork.reason.rawValue, replica: fork.replica.description, user: authors.user(fork.replica),
                 keptThrough: fork.keptThrough, before: fork.before, successor: fork.successor.description,
                 reauthored: fork.reauthored, date: Format.time(microseconds: Int64((fork.date.timeIntervalSince1970 * 1_000_000).rounded())))
        }
    }

    var lineageLines: [String] {
        var lines = ["lineage"]
        for f in lineage {
            let why = switch f.reason {
            case "forked": "forked (another copy authored the same sequences)"
            case "logLost": "log lost (store.json outlived its log)"
            case "clockRestamp": "re-stamped (the device's clock was wrong)"
            default: f.reason
            }
            lines.append("  \(f.date)  \(why): \(f.replica)\(Authors.by(f.user)) kept through sequence \(f.keptThrough); " +
                         "\(f.reauthored) event(s) re-authored as \(f.successor) at position \(f.before)")
        }
        if lineage.isEmpty { lines.append("  (none: the store has always authored as \(replica))") }
        return lines
    }
}
