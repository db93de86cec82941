public import Dispatch
import Foundation
public import Logging
import Synchronization

/// The users a running server authenticates against, replaceable while it serves: `strata serve`
/// reloads its users file on SIGHUP (``reload(logger:)``), so that users added or removed with
/// `strata users` take effect without a restart. A file that cannot be used is logged and the
/// users held so far stay.
///
/// A request authenticates against ``current`` when it begins, and checks again against the
/// users as they are then before it appends, merges a state or answers a long poll: a reload
/// that removed the user ends requests already in flight too.
public final class UserRegistry: Sendable {
    /// The users file this registry reloads, when it came from one.
    public let path: String?
    private let directory: Mutex<UserDirectory>
    /// Called after every replacement (the server wakes its long polls, which check their
    /// callers again).
    private let replaced = Mutex<[@Sendable () -> Void]>([])
    /// Checks a reloaded users file must pass to be served (the server's JWT issuers'
    /// namespaces: see ``JWTVerifier/checkNoClash(with:)``).
    private let checks = Mutex<[@Sendable (UserDirectory) throws(UserDirectoryError) -> Void]>([])

    /// A registry holding `users`; `path` is the file ``reload(logger:)`` reads.
    public init(_ users: UserDirectory, path: String? = nil) {
        self.path = path
        self.directory = Mutex(users)
    }

    /// A registry of the users file at `path`.
    ///
    /// - Throws: ``UserDirectoryError`` naming the file when it cannot be read or parsed.
    public convenience init(loading path: String) throws(UserDirectoryError) {
        self.init(try UserDirectory.load(from: path), path: path)
    }

    /// The users as of now.
    public var current: UserDirectory { directory.withLock { $0 } }

    /// Replaces the users.
    public func replace(with users: UserDirectory) {
        directory.withLock { $0 = users }
        for observer in replaced.withLock({ $0 }) { observer() }
    }

    /// Calls `observer` after every ``replace(with:)`` (and successful ``reload(logger:)``).
    func whenReplaced(_ observer: @escaping @Sendable () -> Void) {
        replaced.withLock { $0.append(observer) }
    }

    /// Makes ``reload(logger:)`` refuse a users file that `check` throws for (keeping the users
    /// held, as for a damaged file).
    func requiring(_ check: @escaping @Sendable (UserDirectory) throws(UserDirectoryError) -> Void) {
        checks.withLock { $0.append(check) }
    }

    /// Reads the users file again and, when it is usable, serves its users from now on; when it is
    /// not (missing, damaged, a duplicate name), logs why and keeps the users it had.
    ///
    /// - Returns: whether the users were replaced.
    @discardableResult
    public func reload(logger: Logger) -> Bool {
        guard let path else { return false }
        do {
            let users = try UserDirectory.load(from: path)
            for check in checks.withLock({ $0 }) { try check(users) }
            replace(with: users)
            logger.notice("users file reloaded", metadata: ["usersFile": "\(path)", "users": "\(users.users.count)"])
            return true
        } catch {
            logger.error("users file not reloaded; the users loaded before stay", metadata: ["usersFile": "\(path)", "error": "\(error.message)"])
            return false
        }
    }
}

extension UserRegistry {
    /// Reloads the users file on every SIGHUP until the returned source is cancelled (what
    /// `strata serve` does while it runs). SIGHUP's default action (ending the process) is
    /// ignored from now on.
    public func reloadingOnHangup(logger: Logger) -> any DispatchSourceSignal {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { [self] in
            logger.notice("SIGHUP received: reloading the users file", metadata: ["usersFile": "\(path ?? "-")"])
            reload(logger: logger)
        }
        source.resume()
        return source
    }
}
