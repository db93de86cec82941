import ArgumentParser
import Foundation
import Strata
import StrataCore

/// `strata log STORE [filters]`: the events, one per line (JSON Lines with `--json`). On a
/// database, every zone's (or `--zone`'s), each entry tagged with its zone.
struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Print the events of the log, filtered by position, time, entity, object, replica, user or kind."
    )

    @OptionGroup var storeArgument: StoreArgument

    @OptionGroup var zoneOption: ZoneOption

    @Option(help: "The first log position to show (in a database, of each zone's log).")
    var from: UInt64?

    @Option(help: "The last log position to show.")
    var to: UInt64?

    @Option(help: "Only transactions stored at or after this time (ISO 8601, or @microseconds).")
    var since: String?

    @Option(help: "Only transactions stored at or before this time.")
    var until: String?

    @Option(help: "Only events of this entity.")
    var entity: String?

    @Option(help: "Only events that name this object (as subject, member or reference target).")
    var object: String?

    @Option(help: "Only events of the replica whose ID starts with this.")
    var replica: String?

    @Option(help: "Only events of replicas this user pushed (as the store recorded from the log server).")
    var user: String?

    @Option(help: "Only events of this kind: insert, update, delete, add, remove, schema, withheld (left out by a download mask); or adopt: only the states the store adopted from a zone.")
    var kind: String?

    @Option(help: "Stop after this many events.")
    var limit: Int?

    @Flag(help: "Print JSON Lines (one event per line) instead of text.")
    var json = false

    func validate() throws {
        if let since, TimeArgument.microseconds(since) == nil { throw ValidationError("--since: not a time: \(since)") }
        if let until, TimeArgument.microseconds(until) == nil { throw ValidationError("--until: not a time: \(until)") }
        if let object, !ObjectReference.isValid(object) { throw ValidationError("--object: neither an object ID (UUID) nor the start of one (at least 4 hex digits): \(object)") }
        if let kind, !["insert", "update", "delete", "add", "remove", "schema", "withheld", "adopt"].contains(kind) { throw ValidationError("--kind: unknown kind \(kind)") }
        if let from, let to, from > to { throw ValidationError("--from \(from) is after --to \(to)") }
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let targets = try ZoneTargets(storeArgument.store, zone: zoneOption.zone)
        var printed = 0
        var objectFound = false
        var notFound: CLIError?
        for target in targets.targets {
            do {
                try show(target.path, zone: target.zone, printed: &printed)
                objectFound = true
            } catch let error as CLIError where targets.isDatabase && error.exitCode == ExitStatus.finding && error.message.hasPrefix("no object") {
                // An object ID prefix names an object of some zone, not of every one.
                notFound = error
            }
            if let limit, printed >= limit { break }
        }
        if !objectFound, let notFound {
            throw CLIError("no object of any zone of \(storeArgument.store) has an ID starting with \(object ?? "")", exitCode: notFound.exitCode)
        }
    }

    /// The entries of one store (a zone's, tagged with `zone`), counting what it prints in `printed`.
    private func show(_ store: String, zone: ZoneReference?, printed: inout Int) throws {
        let tag = zone.map { "[\($0)] " } ?? ""
        let files = try StoreFiles(store)
        let identity = try files.identity()
        if identity.startPosition > 0 {
            StandardError.line("note: the history before position \(identity.startPosition) was compacted into a snapshot; the log lists what follows it")
        }
        let authors = Authors(ofStoreAt: files.directory)
        for warning in authors.warnings { StandardError.line("warning: \(warning)") }
        if let user, !authors.users.values.contains(user) {
            StandardError.line("note: no replica of \(store) is known to be \(user)'s (its authors: \(Set(authors.users.values).sorted().joined(separator: ", ")))")
        }
        let filter = EventFilter(from: from, to: to, since: since.flatMap(TimeArgument.microseconds), until: until.flatMap(TimeArgument.microseconds),
                                 entity: entity, object: try object.map { try ObjectReference.resolve($0, in: files) }, replicaPrefix: replica?.lowercased(), kind: kind,
                                 user: user, authors: authors)
        let limit = self.limit ?? .max
        var output = BufferedOutput()
        struct Enough: Error {}
        do {
            let report = try files.scan(progress: nil) { entry in
                guard filter.admits(position: entry.position, timestamp: entry.timestamp) else { return }
                if AdoptionRecord.isAdoption(entry.payload) {
                    // A state the store adopted: listed unless the filter asks for events only.
                    guard filter.admitsAdoptions else { return }
                    guard printed < limit else { throw Enough() }
                    let adoption = try AdoptionDescription(entry: entry, directory: store)
                    output.line(json ? try JSONOutput.string(Zoned(zone: zone, value: adoption), pretty: false) : tag + adoption.text)
                    printed += 1
                    return
                }
                let record: TransactionRecord
                do {
                    record = try TransactionRecord(decoding: entry.payload)
                } catch {
                    throw CLIError("\(store): \(error) (record at byte \(entry.recordOffset) of \(entry.segment))", exitCode: ExitStatus.finding)
                }
                for event in record.events where filter.admits(event) {
                    guard printed < limit else { throw Enough() }
                    let description = EventDescription(event, position: entry.position, stored: entry.timestamp, user: authors.user(event.id.replica))
                    output.line(json ? try JSONOutput.string(Zoned(zone: zone, value: description), pretty: false) : tag + description.text)
                    printed += 1
                }
            }
            output.flush()
            if let warning = report.readWarning { StandardError.line(warning) }
        } catch is Enough {
            output.flush()
        }
    }
}

/// Which events `strata log` shows.
struct EventFilter {
    var from: UInt64?
    var to: UInt64?
    var since: Int64?
    var until: Int64?
    var entity: String?
    var object: ObjectID?
    var replicaPrefix: String?
    var kind: String?
    /// Only events of replicas this user pushed, per `authors`.
    var user: String? = nil
    var authors = Authors()

    func admits(position: UInt64, timestamp: Int64) -> Bool {
        if let from, position < from { return false }
        if let to, position > to { return false }
        if let since, timestamp < since { return false }
        if let until, timestamp > until { return false }
        return true
    }

    /// Adoption records have no entity, object, replica or author: listed only when no filter
    /// names one (or the kind asked for is `adopt`).
    var admitsAdoptions: Bool {
        if let kind { return kind == "adopt" }
        return entity == nil && object == nil && replicaPrefix == nil && user == nil
    }

    func admits(_ event: Event) -> Bool {
        if let kind, event.change.kind != kind { return false }
        if let entity, event.change.entity != entity { return false }
        if let replicaPrefix, !event.id.replica.description.hasPrefix(replicaPrefix) { return false }
        if let object, !event.change.mentions(object) { return false }
        if let user, authors.user(event.id.replica) != user { return false }
        return true
    }
}
