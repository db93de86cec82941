// An app names a few of the log's types — the durability it asks for, what a snapshot is, a log
// error inside a store error — so those are re-exported, one by one. The rest of StrataLog (its
// byte coding, the segment log that appends raw bytes) is the store's business, not the app's:
// tools that need it import StrataLog themselves.
@_exported public import enum StrataLog.Durability
@_exported public import struct StrataLog.SnapshotInfo
@_exported public import struct StrataLog.LogError

// The part of StrataCore an app names: identifiers, values and errors, the schema it declares,
// what an observer is told, what a read returns, what a sync reports of a fork. The rest of the core (the event codec, the
// projection builder, transaction records and headers, lineage) is shared by the sync engine, the
// server and the tools, which import StrataCore themselves; an app's `import Strata` does not
// show it.
@_exported public import protocol StrataCore.Identifier128
@_exported public import struct StrataCore.ObjectID
@_exported public import struct StrataCore.ReplicaID
@_exported public import enum StrataCore.Value
@_exported public import struct StrataCore.Asset
@_exported public import struct StrataCore.AssetHash
@_exported public import struct StrataCore.AssetManifest
@_exported public import struct StrataCore.DownloadMask
@_exported public import struct StrataCore.StoreError
@_exported public import struct StrataCore.Schema
@_exported public import enum StrataCore.SchemaBuilder
@_exported public import struct StrataCore.SchemaMigration
@_exported public import enum StrataCore.TypeConversion
@_exported public import struct StrataCore.SchemaFinding
@_exported public import struct StrataCore.Entity
@_exported public import struct StrataCore.Attribute
@_exported public import enum StrataCore.AttributeType
@_exported public import struct StrataCore.Relationship
@_exported public import enum StrataCore.DeleteRule
@_exported public import struct StrataCore.ChangeSet
@_exported public import struct StrataCore.ObjectChange
@_exported public import struct StrataCore.ObjectSnapshot
@_exported public import struct StrataCore.Filter
@_exported public import struct StrataCore.FieldProvenance
@_exported public import struct StrataCore.EventID
@_exported public import struct StrataCore.HLC
// A sync report lists the forks a sync made (`SyncReport.forks`).
@_exported public import struct StrataCore.ReplicaFork

// What only the sync engine, the server, the command line tool and the tests use — applying
// pulled transactions, adopting or uploading a state, sync pins, forks, the raw history and the
// segment log — is `@_spi(StrataInternals)`: `@_spi(StrataInternals) import Strata` sees it, an
// app's `import Strata` does not.
