import ArgumentParser
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore

/// `strata init STORE --schema FILE.json`: creates a store (or adds to its recorded schema).
struct InitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "init", abstract: "Create a store with a schema (JSON).")

    @Argument(help: "The store directory to create.")
    var store: String

    @Option(help: "The schema as JSON: {\"entities\": [{\"name\": …, \"attributes\": […], \"relationships\": […]}]}.")
    var schema: String

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func run() async throws {
        guard let data = FileManager.default.contents(atPath: schema) else { throw CLIError("cannot read the schema file \(schema)") }
        let parsed: Schema
        do {
            parsed = try Schema.fromJSON(data)
        } catch {
            throw CLIError("\(schema): \(error)")
        }
        let opened: Store
        do {
            opened = try await Store.open(at: store, schema: parsed)
        } catch {
            throw CLIError("cannot create the store \(store): \(error)")
        }
        let replica = opened.replicaID
        try await opened.close()
        if json {
            struct Created: Encodable {
                var store: String
                var replica: String
                var entities: [String]
            }
            print(try JSONOutput.string(Created(store: store, replica: replica.description, entities: parsed.entities.map(\.name))))
        } else {
            print("store \(store) ready: replica \(replica), entities \(parsed.entities.map(\.name).joined(separator: ", "))")
        }
    }
}

/// `strata apply STORE CHANGES.jsonl`: one transaction from JSON Lines (see ``ChangeFile``).
struct ApplyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Apply the changes of a JSON Lines file as one transaction.",
        discussion: """
        One change per line, all or nothing:
          {"op": "insert", "entity": "Note", "id": "<uuid, optional>", "values": {"title": "Milk"}}
          {"op": "update", "id": "<uuid>", "values": {"pinned": true}}
          {"op": "delete", "id": "<uuid>"}
          {"op": "add", "id": "<uuid>", "relationship": "tags", "target": "<uuid>"}
          {"op": "remove", "id": "<uuid>", "relationship": "tags", "target": "<uuid>"}
        Dates are ISO 8601 strings, bytes base64, UUIDs and references UUID strings, assets their
        reference {"sha256", "size", "mediaType", "fileName"} or a file to attach:
          {"op": "update", "id": "<uuid>", "values": {"photo": {"file": "beach.jpg", "mediaType": "image/jpeg"}}}
        (the file is copied into the store; mediaType is guessed from the extension when left out,
        fileName is the file's name unless given). An error names the line and the field, and
        nothing is committed.
        """
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Argument(help: "The changes (JSON Lines); - reads standard input.")
    var changes: String

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func run() async throws {
        let text: String
        if changes == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: changes) else { throw CLIError("cannot read \(changes)") }
            text = String(decoding: data, as: UTF8.self)
        }
        let source = changes == "-" ? "stdin" : changes
        var parsed = try ChangeFile(text: text, source: source)
        let opened = try openStore(store)
        let schema = opened.schema
        do {
            // Attached files go into the store first; the transaction then names them. (A failed
            // transaction leaves them unnamed: kept until assets are collected.)
            let attached = try await parsed.importAttachments(into: opened, source: source)
            let file = parsed
            let before = opened.segmentLog.endPosition
            let inserted = try await opened.transaction { tx in try file.apply(in: tx, schema: schema, source: source) }
            let position = opened.segmentLog.endPosition
            try await opened.close()
            // A transaction whose changes were all already in effect (a delete of nothing, an
            // update to the same values) writes no record: say so rather than name a position.
            let committed = position > before
            if json {
                print(try JSONOutput.string(ApplyResult(changes: file.changes.count, inserted: inserted.map(\.description),
                                                        position: committed ? position - 1 : nil, committed: committed,
                                                        attached: attached.isEmpty ? nil : attached.map { JSONValue(.asset($0)) })))
            } else if committed {
                print("applied \(file.changes.count) change(s) as one transaction at position \(position - 1)")
                for id in inserted { print("inserted \(id)") }
                for asset in attached { print("attached \(asset)") }
            } else {
                print("committed nothing: the \(file.changes.count) change(s) were already in effect")
            }
        } catch {
            try? await opened.close()
            if let error = error as? CLIError { throw error }
            throw CLIError("\(source): \(error) — nothing was committed")
        }
    }

    struct ApplyResult: Codable {
        var changes: Int
        var inserted: [String]
        /// The transaction's log position; absent when it committed nothing.
        var position: UInt64?
        /// Whether a transaction was written (false when every change was already in effect).
        var committed: Bool
        /// The references of the files attached (`{"file": …}` values); absent when none.
        var attached: [JSONValue]? = nil
    }
}

/// Opens a store for writing with its recorded schema, as a CLI error when it cannot.
func openStore(_ path: String) throws -> Store {
    do {
        return try Store.open(at: path)
    } catch {
        throw CLIError("cannot open the store \(path): \(error)")
    }
}

/// `strata get STORE ENTITY [ID]`: objects of an entity, or one. On a database, every zone's
/// (or `--zone`'s), each tagged with its zone; one object is found in whichever zone holds it.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print the objects of an entity, or one object.")

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @OptionGroup var zoneOption: ZoneOption

    @Argument(help: "The entity.")
    var entity: String

    @Argument(help: "An object ID (UUID), or the start of one (the 8 hex digits log and diff print).")
    var id: String?

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func validate() throws {
        if let id, !ObjectReference.isValid(id) { throw ValidationError("neither an object ID (UUID) nor the start of one (at least 4 hex digits): \(id)") }
    }

    func run() throws {
        let targets = try ZoneTargets(store, zone: zoneOption.zone)
        var projections: [(zone: ZoneReference?, path: String, projection: ProjectionBuilder)] = []
        for target in targets.targets {
            let loaded = try LoadedStore.load(try StoreFiles(target.path))
            if let warning = loaded.report.readWarning { StandardError.line(warning) }
            projections.append((target.zone, target.path, loaded.projection))
        }
        guard projections.contains(where: { $0.projection.schema.entity(entity) != nil || !$0.projection.objectIDs(of: entity).isEmpty }) else {
            let entities = Set(projections.flatMap { $0.projection.schema.entities.map(\.name) }).sorted()
            throw CLIError("no entity \(entity) in \(store) (entities: \(entities.joined(separator: ", ")))")
        }
        if let id {
            // In a database the object is in one zone: found wherever its ID (or prefix) is known.
            var found: (zone: ZoneReference?, object: ObjectJSON)?
            var lastError: CLIError?
            for (zone, path, projection) in projections {
                let objectID: ObjectID
                do {
                    objectID = try ObjectReference.resolve(id, among: projection.knownObjectIDs(), store: targets.isDatabase ? path : store)
                } catch let error as CLIError where error.exitCode == ExitStatus.finding && projections.count > 1 {
                    lastError = error
                    continue
                }
                if let object = projection.object(objectID), object.entity == entity {
                    found = (zone, ObjectJSON(object))
                    break
                }
            }
            guard let found else {
                if let lastError, projections.count == 1 { throw lastError }
                throw CLIError("no \(entity) \(id) in \(store)\(targets.isDatabase ? " (in none of its zones)" : "")", exitCode: ExitStatus.finding)
            }
            print(json ? try JSONOutput.string(Zoned(zone: found.zone, value: found.object)) : (found.zone.map { "[\($0)] " } ?? "") + ObjectText.line(found.object))
            return
        }
        let objects = projections.flatMap { zone, _, projection in
            projection.objectIDs(of: entity).compactMap { projection.object($0) }.map { Zoned(zone: zone, value: ObjectJSON($0)) }
        }
        if json {
            print(try JSONOutput.string(objects))
        } else {
            for object in objects { print((object.zone.map { "[\($0)] " } ?? "") + ObjectText.line(object.value)) }
        }
    }
}

/// `strata export STORE [--jsonl]`: the whole projection as JSON, or as JSON Lines.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export", abstract: "Print the store's objects (and schema) as JSON.",
        discussion: """
        By default one JSON document: {"store", "replica", "digest", "schema", "objects": [...]}. With --jsonl, JSON \
        Lines written as they are produced, for stores too large for one document: a first line {"store", "replica", \
        "digest", "schema", "objectCount"}, then one object per line ({"id", "entity", "values", "toMany"}), sorted by \
        entity then ID.

        On a database directory (one with database.json), every zone (or the one --zone names): one JSON document \
        {"database", "zones": [{"zone", "store", "replica", "digest", "schema", "objectCount"}], "objects": [...]}, each \
        object with its "zone" (NAME for your own zones, OWNER/NAME for shared ones); with --jsonl, each zone's header \
        line and objects in turn, every line with its "zone".
        """
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @OptionGroup var zoneOption: ZoneOption

    @Flag(help: "Print JSON Lines: a header line, then one object per line (in a database, a header line per zone, each line with its zone).")
    var jsonl = false

    func run() throws {
        let targets = try ZoneTargets(store, zone: zoneOption.zone)
        guard targets.isDatabase else { return try exportStore(store, zone: nil) }
        if jsonl {
            for target in targets.targets { try exportStore(target.path, zone: target.zone) }
            return
        }
        // One document for the database: each zone's identity and schema, then every object
        // tagged with its zone, sorted by zone, entity, ID.
        struct ZoneExport: Encodable {
            var zone: String
            var store: String
            var replica: String
            var digest: String
            var schema: JSONValue
            var objectCount: Int
        }
        struct DatabaseExport: Encodable {
            var database: String
            var zones: [ZoneExport]
            var objects: [Zoned<ObjectJSON>]
        }
        var zones: [ZoneExport] = []
        var objects: [Zoned<ObjectJSON>] = []
        for target in targets.targets {
            guard let zone = target.zone else { continue }
            let files = try StoreFiles(target.path)
            let loaded = try LoadedStore.load(files, progress: Progress("export \(zone)", total: 0))
            if let warning = loaded.report.readWarning { StandardError.line(warning) }
            let projection = loaded.projection
            let schemaJSON = (try? JSONDecoder().decode(JSONValue.self, from: projection.schema.jsonData())) ?? .null
            let zoneObjects = projection.allObjectIDs().compactMap { projection.object($0) }
                .sorted { ($0.entity, $0.id) < ($1.entity, $1.id) }.map { Zoned(zone: zone, value: ObjectJSON($0)) }
            zones.append(ZoneExport(zone: zone.description, store: target.path, replica: files.replicaID.description,
                                    digest: projection.digest(), schema: schemaJSON, objectCount: zoneObjects.count))
            objects += zoneObjects
        }
        print(try JSONOutput.string(DatabaseExport(database: store, zones: zones, objects: objects)))
    }

    /// One store's export (a zone's, each line or object tagged with `zone`).
    private func exportStore(_ store: String, zone: ZoneReference?) throws {
        let progress = Progress("export", total: 0)
        let files = try StoreFiles(store)
        let loaded = try LoadedStore.load(files, progress: progress)
        if let warning = loaded.report.readWarning { StandardError.line(warning) }
        let projection = loaded.projection
        let schemaJSON = (try? JSONDecoder().decode(JSONValue.self, from: projection.schema.jsonData())) ?? .null
        if jsonl {
            // Sorted by entity, then ID, one object decoded at a time: memory holds the IDs, not the document.
            var ids: [(entity: String, id: ObjectID)] = []
            for entity in Set(projection.schema.entities.map(\.name)).sorted() {
                for id in projection.objectIDs(of: entity) { ids.append((entity, id)) }
            }
            let known = Set(ids.map(\.id))
            for id in projection.allObjectIDs() where !known.contains(id) {
                if let object = projection.object(id) { ids.append((object.entity, id)) }
            }
            ids.sort { ($0.entity, $0.id) < ($1.entity, $1.id) }
            struct Header: Encodable {
                var store: String
                var replica: String
                var digest: String
                var schema: JSONValue
                var objectCount: Int
            }
            var output = BufferedOutput()
            output.line(try JSONOutput.string(Zoned(zone: zone, value: Header(store: store, replica: files.replicaID.description, digest: projection.digest(),
                                                     schema: schemaJSON, objectCount: ids.count)), pretty: false))
            for (_, id) in ids {
                guard let object = projection.object(id) else { continue }
                output.line(try JSONOutput.string(Zoned(zone: zone, value: ObjectJSON(object)), pretty: false))
            }
            output.flush()
            return
        }
        let objects = projection.allObjectIDs().compactMap { projection.object($0) }
            .sorted { ($0.entity, $0.id) < ($1.entity, $1.id) }.map(ObjectJSON.init)
        struct Export: Encodable {
            var store: String
            var replica: String
            var digest: String
            var schema: JSONValue
            var objects: [ObjectJSON]
        }
        print(try JSONOutput.string(Export(store: store, replica: files.replicaID.description, digest: projection.digest(), schema: schemaJSON, objects: objects)))
    }
}

/// `strata compact STORE`: a snapshot of the projection, and the segments it covers retired.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "compact", abstract: "Snapshot the store and retire the log segments the snapshot covers.")

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func run() async throws {
        let progress = Progress("compact", total: 0)
        progress.phase("opening (replaying the log)")
        let opened = try openStore(store)
        let before = opened.segmentLog.segments()
        progress.phase("writing the snapshot")
        let snapshot: SnapshotInfo
        do {
            snapshot = try await opened.compact()
        } catch {
            progress.finish()
            try? await opened.close()
            throw CLIError("cannot compact \(store): \(error)")
        }
        let after = opened.segmentLog.segments()
        try await opened.close()
        progress.finish()
        let retired = before.map(\.name).filter { name in !after.contains { $0.name == name } }
        let freed = before.filter { retired.contains($0.name) }.reduce(Int64(0)) { $0 + $1.byteSize }
        if json {
            struct Result: Codable {
                var snapshot: String
                var position: UInt64
                var retiredSegments: [String]
                var freedBytes: Int64
            }
            print(try JSONOutput.string(Result(snapshot: snapshot.name, position: snapshot.position, retiredSegments: retired, freedBytes: freed)))
        } else {
            print("snapshot \(snapshot.name) at position \(snapshot.position); retired \(retired.count) segment(s), \(Format.bytes(freed)) freed")
        }
    }
}
