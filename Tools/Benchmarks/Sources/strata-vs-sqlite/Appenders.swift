// The two sides of W1 behind one interface: commit `count` corpus events (from index `first`,
// cycling) as one durable commit, returning only when the commit is as durable as promised.
import BenchSupport
import Foundation
import GRDB
import Strata
import StrataCore
import StrataLog

protocol Appender: Sendable {
    /// One durable commit of `count` events.
    func commit(first: Int, count: Int) async throws
    /// Closes the store and returns its bytes on disk (every file in its directory).
    func close() async throws -> Int
}

/// Strata: one `store.transaction` of `count` inserts of `Entry`, each with a fresh ObjectID.
/// The transaction returns once its log record is durable under the store's `Durability`.
final class StrataAppender: Appender {
    let store: Store
    let directory: String
    let corpus: Corpus

    init(directory: String, durability: Durability, corpus: Corpus) async throws {
        self.directory = directory
        self.corpus = corpus
        // No automatic compaction: W1 measures the commit path against SQLite's and the raw log's.
        // A 256- or 4,096-event row writes several hundred thousand events, so the default would
        // snapshot the growing projection in the background, on the same 2 cores, during the
        // rounds (strata-store-bench's row 5 measures what that costs).
        var options = StoreOptions(durability: durability)
        options.autoCompaction = .disabled
        store = try await Store.open(at: directory, schema: entrySchema, options: options)
    }

    func commit(first: Int, count: Int) async throws {
        let corpus = corpus
        try await store.transaction { tx in
            for k in 0..<count {
                _ = try tx.insert("Entry", corpus.values[(first &+ k) % corpus.count])
            }
        }
    }

    func close() async throws -> Int {
        try await store.close()
        return Machine.directorySize(directory)
    }
}

/// The raw log under the Store, for reference: one `SegmentLog.append` of `count` entries (the
/// events' JSON bytes as they are, no object, no projection) per commit, fsync per record. It
/// shows what the Store's event layer costs on top of the log; the goals are the Store's.
final class SegmentLogAppender: Appender {
    let log: SegmentLog
    let directory: String
    let corpus: Corpus

    init(directory: String, corpus: Corpus) throws {
        self.directory = directory
        self.corpus = corpus
        log = try SegmentLog.open(at: directory, options: LogOptions(durability: .fsyncPerRecord))
    }

    func commit(first: Int, count: Int) async throws {
        var entries: [LogEntry] = []
        entries.reserveCapacity(count)
        for k in 0..<count { entries.append(corpus.entries[(first &+ k) % corpus.count]) }
        _ = try await log.append(entries)
    }

    func close() async throws -> Int {
        try await log.close()
        return Machine.directorySize(directory)
    }
}

/// SQLite: what "an events table in SQLite" looks like — one row per event with the object it
/// belongs to (a fresh random 16-byte ID, as Strata makes), a timestamp and the JSON body; one
/// transaction per commit through GRDB's writer, with a cached prepared statement.
final class SQLiteAppender: Appender {
    static let createTable = "CREATE TABLE event(seq INTEGER PRIMARY KEY, object BLOB NOT NULL, ts INTEGER NOT NULL, body TEXT NOT NULL)"
    static let insert = "INSERT INTO event(object, ts, body) VALUES (?, ?, ?)"

    let pool: DatabasePool
    let directory: String
    let corpus: Corpus
    let pragmas: SQLiteSetup.Pragmas

    init(directory: String, corpus: Corpus) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        self.corpus = corpus
        (pool, pragmas) = try SQLiteSetup.open(directory + "/events.sqlite")
        try pool.write { db in try db.execute(sql: SQLiteAppender.createTable) }
    }

    func commit(first: Int, count: Int) async throws {
        let corpus = corpus
        try await pool.write { db in
            let statement = try db.cachedStatement(sql: SQLiteAppender.insert)
            for k in 0..<count {
                let i = (first &+ k) % corpus.count
                try statement.execute(arguments: [Data(ObjectID.random().bytes), corpus.timestamps[i], corpus.bodies[i]])
            }
        }
    }

    func close() async throws -> Int {
        try SQLiteSetup.checkpoint(pool)
        try pool.close()
        return Machine.directorySize(directory)
    }
}
