import ArgumentParser
import Foundation
@_spi(StrataInternals) import Strata

/// `--zone NAME` or `--zone OWNER/NAME`, shared by the reading tools that accept a database.
struct ZoneOption: ParsableArguments {
    @Option(help: "In a database directory, only this zone: NAME (one of your own zones) or OWNER/NAME (a zone another user shares). Without it, every zone.")
    var zone: String?

    func validate() throws {
        if let zone, ZoneTargets.reference(zone) == nil {
            throw ValidationError("--zone: neither NAME nor OWNER/NAME (a name is 1–64 of [A-Za-z0-9._-]): \(zone)")
        }
    }
}

/// The stores a reading tool reads: a plain store directory is one store with no zone; a
/// database directory (one holding `database.json`) is a store per zone, or the one `--zone` names.
struct ZoneTargets {
    /// A zone's store (`zone` is `nil` for a plain store).
    struct Target {
        var zone: ZoneReference?
        var path: String
    }

    var targets: [Target]
    /// The database's layout; `nil` for a plain store.
    var layout: DatabaseLayout?

    var isDatabase: Bool { layout != nil }

    /// - Throws: ``CLIError`` (exit 2) when `database.json` is damaged (with the typed error's
    ///   message), when `--zone` is given for a plain store, or names a zone the database does not hold.
    init(_ directory: String, zone: String?) throws {
        // A debug bundle (a file) is one store's.
        if DebugBundle.isBundle(directory) {
            if let zone { throw CLIError("--zone \(zone): \(directory) is a debug bundle of one store, not a database") }
            layout = nil
            targets = [Target(zone: nil, path: directory)]
            return
        }
        do {
            layout = try Database.layout(ofDatabaseAt: directory)
        } catch {
            throw CLIError("\(error)")
        }
        guard let layout else {
            if let zone { throw CLIError("--zone \(zone): \(directory) is a store, not a database (it has no database.json)") }
            targets = [Target(zone: nil, path: directory)]
            return
        }
        let all = layout.zones.map { Target(zone: $0.zone, path: $0.path) }
        guard let zone else {
            targets = all
            return
        }
        guard let reference = Self.reference(zone), let target = all.first(where: { $0.zone == reference }) else {
            throw CLIError("--zone \(zone): the database \(directory) holds no such zone (zones: \(all.compactMap { $0.zone?.description }.joined(separator: ", ")))")
        }
        targets = [target]
    }

    /// `NAME` or `OWNER/NAME` as a zone reference; `nil` when neither.
    static func reference(_ text: String) -> ZoneReference? {
        let reference: ZoneReference
        if let slash = text.lastIndex(of: "/") {
            reference = ZoneReference(String(text[text.index(after: slash)...]), owner: String(text[..<slash]))
        } else {
            reference = ZoneReference(text)
        }
        guard ZoneReference.isValidName(reference.name), reference.owner.map(ZoneReference.isValidOwner) ?? true else { return nil }
        return reference
    }
}

/// A `--json` value with the zone it comes from added as its `zone` key (`OWNER/NAME` for another
/// user's zone); with no zone (a plain store), the value as it is.
struct Zoned<Value: Encodable>: Encodable {
    var zone: ZoneReference?
    var value: Value

    private enum Key: String, CodingKey { case zone }

    func encode(to encoder: any Encoder) throws {
        try value.encode(to: encoder)
        guard let zone else { return }
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(zone.description, forKey: .zone)
    }
}
