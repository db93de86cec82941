extension Database {
    /// What `database.json` in `directory` says — the zones with their stores' directories, the
    /// default zone, the zones set aside — read without opening anything: the `strata` tools
    /// read databases copied from devices, and databases in use, and must change nothing.
    ///
    /// - Returns: `nil` when `directory` holds no `database.json` (a plain store, or nothing).
    /// - Throws: `StoreError` `corruptDatabase`, naming the file, when it is damaged.
    @_spi(StrataInternals)
    public static func layout(ofDatabaseAt directory: String) throws -> DatabaseLayout? {
        guard let manifest = try DatabaseManifest.read(in: directory) else { return nil }
        return DatabaseLayout(defaultZone: manifest.defaultZone,
                              zones: manifest.zones.map { ($0.zone, directory + "/" + $0.directory) },
                              lost: manifest.lost.map { ($0, directory + "/" + $0.directory) })
    }
}

/// A database's zones as its `database.json` lists them (see `Database.layout(ofDatabaseAt:)`).
@_spi(StrataInternals)
public struct DatabaseLayout: Sendable {
    public var defaultZone: ZoneReference
    /// Each zone and its store's directory, in the manifest's order.
    public var zones: [(zone: ZoneReference, path: String)]
    /// Each zone set aside and its kept store's directory.
    public var lost: [(zone: LostZone, path: String)]
}
