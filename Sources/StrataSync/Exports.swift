// The protocol's types that StrataSync's public API names — the error codes a `SyncError`
// carries, and what a `SyncTransport` returns — re-exported, so that an app (or its own
// transport) names them with `import StrataSync` alone.
@_exported public import struct StrataProtocol.ErrorCode
@_exported public import struct StrataProtocol.PushAnswer
@_exported public import struct StrataProtocol.StateAnswer
@_exported public import struct StrataProtocol.ReplicaInfo
