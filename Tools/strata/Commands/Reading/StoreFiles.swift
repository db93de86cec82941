import Foundation
@_spi(StrataInternals) import Strata
import StrataLog
import StrataSync
import StrataCore

/// A store's files, read without opening the store for writing: the tools run on copies taken
/// from devices and on stores in use, and must change nothing (opening would take the writer's
/// lock and truncate a torn tail).
struct StoreFiles: Sendable {
    /// The store's directory (for a debug bundle, where it was unpacked).
    let directory: String
    /// What the user named: the store's directory, or the bundle file (for output).
    let name: String
    /// What `store.json` says (current replica, log ID, lineage); `nil` only when it is damaged
    /// and the caller tolerated that (see ``identityProblem``).
    let storeIdentity: StoreIdentity?
    /// Why `store.json` could not be used (`verify` reports it as a finding).
    let identityProblem: String?

    /// The replica the store authors under now (all zero when `store.json` is damaged).
    var replicaID: ReplicaID { storeIdentity?.replicaID ?? ReplicaID(rawValue: 0) }
    var identityPath: String { directory + "/store.json" }
    var logDirectory: String { Store.logDirectory(ofStoreAt: directory) }

    /// Two stores' files, read on two cores (a bundle is unpacked first: the two at once).
    static func pair(_ a: String, _ b: String) throws -> [StoreFiles] {
        let paths = [a, b]
        let results = Slots<Result<StoreFiles, any Error>>()
        DispatchQueue.concurrentPerform(iterations: 2) { i in results.set(i, Result { try StoreFiles(paths[i]) }) }
        guard let first = results.get(0), let second = results.get(1) else { throw CLIError("internal: a store was not read") }
        return [try first.get(), try second.get()]
    }

    /// - Parameter tolerateDamagedIdentity: read a store whose `store.json` is damaged (its
    ///   history is then replayed without a lineage), recording why in ``identityProblem``.
    /// - Throws: ``CLIError`` (exit 2) when `directory` is not a readable store.
    init(_ path: String, tolerateDamagedIdentity: Bool = false) throws {
        // A debug bundle reads as the store it was made of, unpacked once per process.
        let directory = try BundleCache.directory(for: path)
        do {
            storeIdentity = try Store.identity(ofStoreAt: directory)
            identityProblem = nil
        } catch let error as StoreError where error.code == .corruptIdentity && tolerateDamagedIdentity {
            storeIdentity = nil
            identityProblem = error.message
        } catch {
            throw CLIError("\(error)")
        }
        self.directory = directory
        self.name = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: Store.logDirectory(ofStoreAt: directory), isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError("\(directory) has no log directory (\(Store.logDirectory(ofStoreAt: directory)))")
        }
    }

    /// The log's identity and snapshot files.
    func identity() throws -> LogIdentity {
        do {
            return try SegmentLog.identity(at: logDirectory)
        } catch {
            throw CLIError("cannot read the log of \(directory): \(error)")
        }
    }

    /// Bytes of all segment files (the work a full read does, for progress).
    func segmentBytes() -> Int64 {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: logDirectory)) ?? []
        return names.filter { $0.hasSuffix(".seg") }.reduce(Int64(0)) { $0 + FileSize.of(logDirectory + "/" + $1) }
    }

    /// The sync cursors kept next to the store (`sync-<zone>.json`), read by the sync engine's own
    /// reader (damaged ones left out).
    func syncCursors() -> [(zone: String, token: String?, acknowledged: UInt64)] {
        SyncCursor.cursors(inStoreAt: directory).compactMap { entry in
            entry.cursor.map { (String(entry.file.dropFirst(5).dropLast(5)), $0.token, $0.acknowledged) }
        }
    }
}

/// One log entry — one transaction — as read, with where it lies.
struct HistoryEntry {
    var position: UInt64
    /// When the device stored it (microseconds since 1970).
    var timestamp: Int64
    var payload: [UInt8]
    /// The segment file and the byte offset of the record that holds it.
    var segment: String
    var recordOffset: Int64
}

extension StoreFiles {
    /// Walks the whole log once, checking every record as ``SegmentLog/verify(at:progress:record:)``
    /// does, and hands each entry of the records that verified to `body`, in position order. When
    /// `body` throws, it is not called again (the walk finishes its checks) and the error is
    /// rethrown.
    ///
    /// - Returns: the verification report: problems, torn tail, indexes, snapshots.
    func scan(progress: Progress?, slot: Int = 0, _ body: (HistoryEntry) throws -> Void) throws -> VerifyReport {
        var failure: (any Error)?
        let report: VerifyReport
        do {
            report = try withoutActuallyEscaping(body) { body in
                try SegmentLog.verify(at: logDirectory, progress: { progress?.update($0, slot: slot) }) { record in
                    guard failure == nil else { return }
                    do {
                        for entry in record.entries {
                            try body(HistoryEntry(position: entry.position, timestamp: entry.timestamp, payload: entry.payload,
                                                  segment: record.segment, recordOffset: record.offset))
                        }
                    } catch {
                        failure = error
                    }
                }
            }
        } catch let error as LogError {
            throw CLIError("cannot read the log of \(directory): \(error)")
        }
        if slot == 0 { progress?.finish() }
        if let failure { throw failure }
        return report
    }
}

extension VerifyReport {
    /// A warning for the reading commands when the log could not be read to its end.
    var readWarning: String? {
        if let problem = problems.first {
            return "warning: the log is damaged (\(problem)); showing what precedes the damage — run `strata verify`"
        }
        return nil
    }
}

/// Debug bundles (`strata bundle`) the tools were given, unpacked into temporary directories
/// once per process and removed when the command ends.
enum BundleCache {
    /// One bundle's unpacking: its own lock, so that two bundles unpack at once (a diff's two
    /// sides, one per core) while a second reader of the same bundle waits for the first.
    private final class Entry: @unchecked Sendable {
        let lock = NSLock()
        var directory: String?
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var unpacked: [String: Entry] = [:]

    /// `path` itself when it is a directory (a store), else the directory a bundle there was
    /// unpacked into.
    static func directory(for path: String) throws -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue, DebugBundle.isBundle(path) else { return path }
        let entry = lock.withLock {
            if let entry = unpacked[path] { return entry }
            let entry = Entry()
            unpacked[path] = entry
            return entry
        }
        entry.lock.lock()
        defer { entry.lock.unlock() }
        if let done = entry.directory { return done }
        let directory = NSTemporaryDirectory() + "strata-bundle-" + UUID().uuidString.prefix(8).lowercased()
        do {
            try DebugBundle.extract(path, into: directory)
        } catch let error as StoreError {
            try? FileManager.default.removeItem(atPath: directory)
            throw CLIError(error.message, exitCode: ExitStatus.usageOrIO)
        }
        entry.directory = directory
        return directory
    }

    /// Removes every unpacked bundle.
    static func removeAll() {
        lock.lock()
        defer { lock.unlock() }
        for entry in unpacked.values {
            entry.lock.withLock {
                if let directory = entry.directory { try? FileManager.default.removeItem(atPath: directory) }
                entry.directory = nil
            }
        }
        unpacked = [:]
    }
}
