// Apps that use Strata also name the log's types (Durability, SnapshotInfo, LogError), so the
// module re-exports StrataLog rather than making every app import it too.
@_exported public import StrataLog
