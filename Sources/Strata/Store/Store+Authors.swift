import Foundation
import Logging
import Synchronization
public import StrataCore

extension Store {
    /// Serializes the read-merge-write of `recordAuthors` within the process (the store's
    /// directory lock already keeps other processes from writing this store). A static lock: the
    /// file is tiny and written rarely, so stores need not each have their own.
    private static let authorsLock = Mutex<Void>(())

    /// Records which user pushed each replica's events, as the log server reports it. Merged with
    /// what is known; a replica's user never changes once recorded (a replica belongs to one user
    /// forever, so a different user for a known replica is ignored and logged as a warning). Empty
    /// user names are ignored. The file is written only when something new is learned — this is
    /// called after every pull.
    ///
    /// A damaged `authors.json` (checksum mismatch, not this layout) is not trusted at all: its
    /// entries are dropped, it is kept beside the store as `authors.json.damaged`, and the file is
    /// rewritten from `authors` alone — the server reports the replicas' users again on the next
    /// pull (to a zone's owner every replica's, to another user only their own), and the authors
    /// are a display aid, never an input to the merge or to sync.
    ///
    /// - Throws: `StoreError` — `StoreError.Code.damagedAuthors` when the file is of a newer
    ///   format (it is left as it is, not overwritten), `StoreError.Code.storeFailed` when the
    ///   store is closed, `StoreError.Code.log` when the file cannot be written.
    public func recordAuthors(_ authors: [ReplicaID: String]) throws {
        if core.withLock({ $0.closed }) { throw StoreError(.storeFailed, "the store is closed") }
        try Self.authorsLock.withLock { _ in
            var known: [ReplicaID: String] = [:]
            var damaged = false
            switch try AuthorsFile.read(in: directory) {
            case nil:
                break
            case .success(let file)?:
                known = file.authors
            case .failure(.unsupportedFormat(let format))?:
                throw StoreError(.damagedAuthors, "\(directory)/\(AuthorsFile.name) has format \(format), written by a newer Strata; left unchanged")
            case .failure(.damaged(let why))?:
                logger.warning("ignoring a damaged authors file; it is rewritten from what the server reports", metadata: ["file": "\(directory)/\(AuthorsFile.name)", "problem": "\(why)"])
                damaged = true
            }
            var learned = false
            for replica in authors.keys.sorted() {
                guard let user = authors[replica], !user.isEmpty else { continue }
                if let recorded = known[replica] {
                    if recorded != user {
                        logger.warning("a replica's user never changes: keeping the one recorded", metadata: [
                            "replica": "\(replica)", "recorded": "\(recorded)", "reported": "\(user)"])
                    }
                    continue
                }
                known[replica] = user
                learned = true
            }
            guard learned else { return }
            if damaged {
                // Kept for whoever wants to look at it; losing it costs nothing the server cannot tell again.
                let path = directory + "/" + AuthorsFile.name
                try? FileManager.default.removeItem(atPath: path + ".damaged")
                try? FileManager.default.moveItem(atPath: path, toPath: path + ".damaged")
            }
            try AuthorsFile(authors: known).write(in: directory)
        }
    }

    /// What is known: replica → user. Empty when nothing is recorded or the file is damaged (then
    /// a warning is logged); read from the file on each call (it is small, and this way it never
    /// disagrees with what tools read).
    public func authors() -> [ReplicaID: String] {
        do {
            return try Self.authors(ofStoreAt: directory)
        } catch {
            logger.warning("cannot use the authors file", metadata: ["error": "\(error)"])
            return [:]
        }
    }

    /// Read-only, for tools on copied stores: the authors file of the store at `directory` (`[:]`
    /// when there is none).
    ///
    /// - Throws: `StoreError.Code.damagedAuthors` when the file is damaged or of a newer
    ///   format; `StoreError.Code.invalidArgument` when it cannot be read.
    public static func authors(ofStoreAt directory: String) throws -> [ReplicaID: String] {
        switch try AuthorsFile.read(in: directory) {
        case nil:
            return [:]
        case .success(let file)?:
            return file.authors
        case .failure(.damaged(let why))?:
            throw StoreError(.damagedAuthors, "\(directory)/\(AuthorsFile.name) is damaged: \(why)")
        case .failure(.unsupportedFormat(let format))?:
            throw StoreError(.damagedAuthors, "\(directory)/\(AuthorsFile.name) has format \(format), which this version of Strata cannot read")
        }
    }
}
