import Strata
import StrataCore

/// An object named on the command line: its full ID, or the start of it — the 8 hex digits
/// `log` and `diff` print are enough when no other object of the store starts the same way.
enum ObjectReference {
    /// Whether `text` can name an object: a UUID, or at least 4 of its leading hex digits (dashes
    /// where a UUID has them).
    static func isValid(_ text: String) -> Bool {
        if ObjectID(text) != nil { return true }
        let digits = text.lowercased().filter { $0 != "-" }
        return digits.count >= 4 && digits.count < 32 && digits.allSatisfy(\.isHexDigit)
    }

    /// The object `text` names in the store at `files`: a full ID as it is; a prefix resolved
    /// against every object the store's history knows (deleted ones included).
    ///
    /// - Throws: ``CLIError`` when no object starts with it, or several do (they are listed).
    static func resolve(_ text: String, in files: StoreFiles, progress: Progress? = nil) throws -> ObjectID {
        if let id = ObjectID(text) { return id }
        let loaded = try LoadedStore.load(files, start: .earliest, progress: progress)
        return try resolve(text, among: loaded.projection.knownObjectIDs(), store: files.name)
    }

    /// The one object among `known` whose ID is or starts with `text`.
    ///
    /// - Throws: ``CLIError``: exit 1 when none does (nothing found), 2 when several do (say more).
    static func resolve(_ text: String, among known: [ObjectID], store: String) throws -> ObjectID {
        if let id = ObjectID(text) { return id }
        let prefix = text.lowercased()
        let matches = known.filter { $0.description.hasPrefix(prefix) }
        switch matches.count {
        case 1: return matches[0]
        case 0: throw CLIError("no object of \(store) has an ID starting with \(text)", exitCode: ExitStatus.finding)
        default:
            let listed = matches.prefix(10).map(\.description).joined(separator: ", ")
            throw CLIError("\(matches.count) objects of \(store) have IDs starting with \(text) (\(listed)\(matches.count > 10 ? ", …" : "")); give more of the ID")
        }
    }
}
