// How the SQLite side opens its database, in one place so that every workload gets the same
// settings: GRDB's DatabasePool (WAL), synchronous=FULL, 4 KiB pages, everything else default.
import BenchSupport
import Foundation
import GRDB

enum SQLiteSetup {
    /// The settings the run checked on the writer connection, for the report.
    struct Pragmas: Sendable {
        var journalMode: String
        var synchronous: Int
        var pageSize: Int
        var walAutocheckpoint: Int
        var version: String

        var summary: String {
            "SQLite \(version) via GRDB DatabasePool: journal_mode=\(journalMode), synchronous=\(synchronous == 2 ? "FULL" : String(synchronous)), page_size=\(pageSize), wal_autocheckpoint=\(walAutocheckpoint)"
        }
    }

    /// Opens (or creates) the database at `path`. GRDB's pool turns on WAL and then sets
    /// `synchronous = NORMAL` on its writer; the run sets it back to FULL (every commit
    /// fsyncs the WAL, like Strata's fsync per record) and checks it took.
    static func open(_ path: String) throws -> (DatabasePool, Pragmas) {
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA page_size = 4096")
        }
        let pool = try DatabasePool(path: path, configuration: config)
        let pragmas = try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            return Pragmas(journalMode: try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
                           synchronous: try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                           pageSize: try Int.fetchOne(db, sql: "PRAGMA page_size") ?? -1,
                           walAutocheckpoint: try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") ?? -1,
                           version: try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?")
        }
        guard pragmas.journalMode == "wal", pragmas.synchronous == 2 else {
            throw BenchError("SQLite did not take WAL + synchronous=FULL: \(pragmas.summary)")
        }
        return (pool, pragmas)
    }

    /// Folds the WAL into the database file and truncates it, so that the directory's size is
    /// the data's steady-state size.
    static func checkpoint(_ pool: DatabasePool) throws {
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }
}
