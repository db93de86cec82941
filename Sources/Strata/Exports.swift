// An app names a few of the log's types — the durability it asks for, what a snapshot is, a log
// error inside a store error — so those are re-exported, one by one. The rest of StrataLog (its
// byte coding, the segment log that appends raw bytes) is the store's business, not the app's:
// tools that need it import StrataLog themselves.
@_exported public import enum StrataLog.Durability
@_exported public import struct StrataLog.SnapshotInfo
@_exported public import struct StrataLog.LogError

// What only the sync engine, the server, the command line tool and the tests use — applying
// pulled transactions, adopting or uploading a state, sync pins, forks, the raw history and the
// segment log — is `@_spi(StrataInternals)`: `@_spi(StrataInternals) import Strata` sees it, an
// app's `import Strata` does not.
