// The protocol's types that StrataSync's public API names — the error codes a `SyncError`
// carries, and what a `SyncTransport` returns — re-exported, so that an app (or its own
// transport) names them with `import StrataSync` alone.
@_exported public import struct StrataProtocol.ErrorCode
@_exported public import struct StrataProtocol.PushAnswer
@_exported public import struct StrataProtocol.StateAnswer
@_exported public import struct StrataProtocol.ReplicaInfo
// The zone a client names lives in Strata (a `Database` holds several); re-exported so that code
// written against StrataSync alone still names it.
@_exported public import struct Strata.ZoneReference
// Sharing and the database's changes: what the sharing calls take and return.
@_exported public import enum StrataProtocol.ZoneAccess
@_exported public import enum StrataProtocol.ZoneGrant
@_exported public import enum StrataProtocol.ZoneRole
@_exported public import struct StrataProtocol.ZoneParticipant
@_exported public import struct StrataProtocol.ZoneDescription
@_exported public import struct StrataProtocol.ZoneSettings
@_exported public import struct StrataProtocol.DatabaseChanges
@_exported public import struct StrataProtocol.DatabaseZone
@_exported public import struct StrataProtocol.RemovedZone
// The device registry: what a sync's state report found (`SyncReport.stateCheck`).
@_exported public import struct StrataProtocol.DeviceReport
@_exported public import struct StrataProtocol.DeviceVerdict
@_exported public import enum StrataProtocol.DeviceStateCheck
@_exported public import struct StrataProtocol.DeviceEntry
@_exported public import struct StrataProtocol.ZoneDevices
