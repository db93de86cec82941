/// A zone as a client names it: its name, and its owner when it is another user's zone (`nil`:
/// the caller's own namespace). As with CloudKit's `CKRecordZone.ID`, a client only ever lands in
/// another user's zone by naming that user.
///
/// A ``Database`` keeps one store per zone; a `SyncEngine` syncs zones with a server.
public struct ZoneReference: Sendable, Hashable, Comparable, CustomStringConvertible, Codable {
    public var name: String
    /// The zone's owner; `nil` for the caller's own zone.
    public var owner: String?

    public init(_ name: String, owner: String? = nil) {
        self.name = name
        self.owner = owner
    }

    public var description: String { owner.map { "\($0)/\(name)" } ?? name }

    /// Own zones first, then by owner, then by name: the order a database lists (and locks) its
    /// zones in.
    public static func < (a: ZoneReference, b: ZoneReference) -> Bool {
        switch (a.owner, b.owner) {
        case (nil, nil): return a.name < b.name
        case (nil, _): return true
        case (_, nil): return false
        case (let x?, let y?): return x != y ? x < y : a.name < b.name
        }
    }

    /// Whether the name is one a server accepts: 1–64 of `[A-Za-z0-9._-]`, and not `.` or `..`
    /// (the server's rule; a database refuses others before they reach a directory name).
    public static func isValidName(_ name: String) -> Bool {
        guard (1...64).contains(name.utf8.count), name != ".", name != ".." else { return false }
        return name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x5F || c == 0x2D
        }
    }

    /// Whether an owner's name is one a server accepts: 1–256 bytes.
    public static func isValidOwner(_ owner: String) -> Bool { (1...256).contains(owner.utf8.count) }

    /// The checks of ``isValidName(_:)`` and ``isValidOwner(_:)``, as a typed error.
    func validate() throws {
        guard Self.isValidName(name) else {
            throw StoreError(.invalidArgument, "invalid zone name \"\(name)\": 1–64 of [A-Za-z0-9._-], not . or ..")
        }
        if let owner, !Self.isValidOwner(owner) {
            throw StoreError(.invalidArgument, "invalid owner of zone \(name): 1–256 bytes")
        }
    }

    /// The zone's directory inside a database, relative to it: `zones/own/NAME` for the caller's
    /// own zones, `zones/shared/OWNER/NAME` for other users', the owner kept to file-name-safe
    /// characters (anything else percent-encoded, so that no two owners share a directory).
    var relativeDirectory: String {
        guard let owner else { return "zones/own/\(name)" }
        var safe = ""
        for byte in owner.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80, c.isLetter || c.isNumber || c == "_" || c == "-" {
                safe.append(c)
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                safe += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return "zones/shared/\(safe)/\(name)"
    }
}
