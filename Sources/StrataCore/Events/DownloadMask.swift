/// What a device does not download of a zone: whole entities (`Comment`), or attributes and
/// relationships of an entity (`Photo.fullImage`). The server leaves them out of what it sends —
/// pulls, long polls and snapshots — so they never reach the device's files, and the assets that
/// masked attributes name are never fetched.
///
/// A masked object or value reads as absent on the device. An event whose every change is masked
/// still arrives as a placeholder (``Change/withheld``) that keeps its place in its replica's
/// sequence. The device's own edits are never masked: what it wrote comes back whole.
///
/// Written as text — in the protocol's `omit` parameter and in a store's record of its masks — as entries
/// separated by commas, each `Entity` or `Entity.name`, sorted and without repeats
/// (``description``): `Comment,Photo.fullImage`.
public struct DownloadMask: Sendable, Hashable, CustomStringConvertible {
    /// Entities not downloaded at all.
    public private(set) var entities: Set<String>
    /// Per entity, the attributes and relationships not downloaded (never one of an entity in
    /// ``entities``: that entity is masked whole).
    public private(set) var attributes: [String: Set<String>]

    /// The most entries a mask may have, the longest name, and the longest text form (a mask
    /// goes in a URL's query: a request's head has to stay well under servers' limits).
    public static let maxEntries = 256
    public static let maxNameBytes = 256
    public static let maxTextBytes = 4096

    /// A mask that leaves nothing out.
    public static let none = DownloadMask(checked: [], [:])

    /// - Parameters:
    ///   - entities: entities not downloaded.
    ///   - attributes: per entity, attributes and relationships not downloaded (those of an
    ///     entity in `entities` are dropped: the whole entity is).
    /// - Throws: ``StoreError`` `invalidArgument` naming a name that is empty, longer than
    ///   ``maxNameBytes`` or holds a `.` or `,` (the text form could not say it), or more than
    ///   ``maxEntries`` entries.
    public init(entities: Set<String> = [], attributes: [String: Set<String>] = [:]) throws {
        let names = Array(entities) + attributes.keys + attributes.values.joined()
        if let bad = names.first(where: { !Self.isValidName($0) }) {
            throw StoreError(.invalidArgument, "\"\(bad.prefix(64))\" cannot be named in a download mask: names are 1 to \(Self.maxNameBytes) bytes, without '.' or ','")
        }
        let count = entities.count + attributes.values.reduce(0) { $0 + $1.count }
        guard count <= Self.maxEntries else {
            throw StoreError(.invalidArgument, "a download mask has at most \(Self.maxEntries) entries, this one \(count)")
        }
        self.init(checked: entities, attributes)
        try checkLength()
    }

    private func checkLength() throws {
        let length = description.utf8.count
        guard length <= Self.maxTextBytes else {
            throw StoreError(.invalidArgument, "a download mask's text form is at most \(Self.maxTextBytes) bytes, this one \(length)")
        }
    }

    private init(checked entities: Set<String>, _ attributes: [String: Set<String>]) {
        self.entities = entities
        self.attributes = attributes.filter { !entities.contains($0.key) && !$0.value.isEmpty }
    }

    static func isValidName(_ name: Substring) -> Bool {
        // Spaces around a name would not survive the text form (parsing drops them).
        !name.isEmpty && name.utf8.count <= maxNameBytes && !name.contains(".") && !name.contains(",")
            && name.first != " " && name.last != " "
    }

    static func isValidName(_ name: String) -> Bool { isValidName(Substring(name)) }

    static func trimmed(_ entry: Substring) -> Substring {
        var entry = entry
        while entry.first == " " { entry = entry.dropFirst() }
        while entry.last == " " { entry = entry.dropLast() }
        return entry
    }

    /// Whether the mask leaves nothing out.
    public var isEmpty: Bool { entities.isEmpty && attributes.isEmpty }

    /// Whether objects of `entity` are left out.
    public func withholds(entity: String) -> Bool { entities.contains(entity) }

    /// Whether `name` (an attribute or relationship) of `entity` is left out.
    public func withholds(_ name: String, of entity: String) -> Bool {
        entities.contains(entity) || attributes[entity]?.contains(name) == true
    }

    /// Whether everything `other` leaves out, this mask leaves out too.
    public func covers(_ other: DownloadMask) -> Bool {
        other.entities.isSubset(of: entities) && other.attributes.allSatisfy { entity, names in
            entities.contains(entity) || names.isSubset(of: attributes[entity] ?? [])
        }
    }

    /// `Comment,Photo.fullImage`: every entry, sorted; empty for ``none``.
    public var description: String {
        (entities.map { $0 } + attributes.flatMap { entity, names in names.map { entity + "." + $0 } }).sorted().joined(separator: ",")
    }

    /// Reads the text form (``description``); entries may come in any order and repeat, and
    /// spaces around an entry are ignored.
    ///
    /// - Throws: ``StoreError`` `invalidArgument` naming the entry: an empty name, a name with a
    ///   `.` or `,` in it, a name longer than ``maxNameBytes``, or more than ``maxEntries`` entries.
    public init(parsing text: String) throws {
        var entities = Set<String>()
        var attributes: [String: Set<String>] = [:]
        guard text.utf8.count <= 4 * Self.maxTextBytes else {
            throw StoreError(.invalidArgument, "a download mask's text form is at most \(Self.maxTextBytes) bytes, this one \(text.utf8.count)")
        }
        let entries = text.isEmpty ? [] : text.split(separator: ",", omittingEmptySubsequences: false).map(Self.trimmed)
        guard entries.count <= Self.maxEntries else {
            throw StoreError(.invalidArgument, "a download mask has at most \(Self.maxEntries) entries, this one \(entries.count)")
        }
        for (index, entry) in entries.enumerated() {
            let parts = entry.split(separator: ".", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), parts.allSatisfy(Self.isValidName) else {
                throw StoreError(.invalidArgument, "download mask entry \(index) (\"\(entry.prefix(64))\") is not Entity or Entity.attribute (names of 1 to \(Self.maxNameBytes) bytes, without '.' or ',')")
            }
            if parts.count == 1 {
                entities.insert(String(parts[0]))
            } else {
                attributes[String(parts[0]), default: []].insert(String(parts[1]))
            }
        }
        self.init(checked: entities, attributes)
        try checkLength()
    }
}
