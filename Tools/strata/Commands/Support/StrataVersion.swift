import StrataProtocol
/// What `strata --version` prints: the tool's version and the formats it reads and writes, so
/// that a bug report says which layouts were on the disk and the wire.
enum StrataVersion {
    /// Raised with every release; the formats below change only with a new format version and a
    /// reader for the old one.
    static let release = StrataLibraryVersion.release

    static var description: String {
        "strata \(release) (segment format 1, event format 1, sync protocol v1)"
    }
}
