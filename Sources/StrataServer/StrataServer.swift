// The log server (issue 4): zones, change tokens, auth, push and pull over HTTP (see
// SyncProtocol.md in the catalog).
