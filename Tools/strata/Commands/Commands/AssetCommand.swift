import ArgumentParser
import Foundation
@_spi(StrataInternals) import Strata
import StrataSync
import StrataCore

/// `strata asset get|list`: the files a store's objects name.
struct AssetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "asset",
        abstract: "Read the assets (attached files) of a store: get one's bytes, list them.",
        subcommands: [AssetGetCommand.self, AssetListCommand.self]
    )
}

/// `strata asset get STORE SHA256 [--output FILE] [--server URL --zone Z --token T]`: the asset's
/// bytes, from the store, or fetched from the server when the store lacks them.
struct AssetGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an asset's bytes to standard output (or --output FILE), fetching them from a server when the store lacks them.",
        discussion: """
        The bytes are checked against the asset's SHA-256 as they are written. A store that holds the \
        asset is only read (it may be open elsewhere). Otherwise, with --server, --zone and a token, \
        the store is opened and a sync engine fetches the asset (through the zone, which must hold an \
        object naming it) into the store first. Exit 1 when the asset is not available (not held and \
        no server given, no object names it, or the server does not have it for this user), or when \
        the store's copy is damaged; exit 2 for usage and I/O errors.
        """
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Argument(help: "The asset's SHA-256 (64 hex digits).")
    var sha256: String

    @Option(name: .shortAndLong, help: "Write the bytes to this file (replaced only once they verify) instead of standard output.")
    var output: String?

    @Option(help: "The server to fetch the asset from when the store lacks it, e.g. http://localhost:8080.")
    var server: String?

    @Option(help: "The zone whose objects name the asset (with --server).")
    var zone: String?

    @Option(help: "The zone's owner, when it is another user's zone.")
    var owner: String?

    @Option(help: "The bearer token of the user (prefer --token-file or STRATA_TOKEN).")
    var token: String?

    @Option(help: "A file holding the bearer token (its first line).")
    var tokenFile: String?

    func validate() throws {
        guard AssetHash(hex: sha256) != nil else { throw ValidationError("not an asset hash (64 lower-case hex digits): \(sha256)") }
        if let server, URL(string: server)?.scheme?.hasPrefix("http") != true { throw ValidationError("--server must be an http(s) URL, got \(server)") }
        if server != nil && zone == nil { throw ValidationError("--server needs --zone (the zone whose objects name the asset)") }
        if server == nil && (zone != nil || owner != nil) { throw ValidationError("--zone and --owner go with --server") }
    }

    func run() async throws {
        guard let hash = AssetHash(hex: sha256) else { throw CLIError("not an asset hash: \(sha256)") }
        let files = try StoreFiles(store)
        let inventory: AssetInventory
        do { inventory = try Store.assetInventory(ofStoreAt: store) } catch { throw CLIError("\(error)") }
        if hash == Asset.empty.sha256 { return try write(nil, hash: hash) }
        if let held = inventory.objects[hash] { return try write(held.path, hash: hash) }
        // Not held: fetching needs the reference (its size and type), from an object naming it.
        let references = AssetReferences(try LoadedStore.load(files, start: .newest).projection)
        guard let reference = references.byHash[hash] else {
            throw CLIError("assetUnavailable: \(store) does not hold asset \(hash), and none of its objects names it (a server gives an asset only through a zone whose objects name it)",
                           exitCode: ExitStatus.finding)
        }
        guard let server, let zone, let url = URL(string: server) else {
            throw CLIError("assetUnavailable: \(store) does not hold \(reference.asset) (named by \(reference.objects) object(s)); give --server, --zone and a token to fetch it",
                           exitCode: ExitStatus.finding)
        }
        let credentials = try SyncToken.resolve(option: token, file: tokenFile)
        let opened = try openStore(store)
        let path: String
        do {
            // The engine attaches itself as the store's asset source; it must live until the fetch ends.
            let engine = try SyncEngine(store: opened, server: url, zone: zone, owner: owner, credentials: credentials)
            defer { withExtendedLifetime(engine) {} }
            let progress = Progress("fetch", total: Int64(clamping: reference.asset.byteCount))
            defer { progress.finish() }
            path = try await opened.asset(reference.asset) { done in progress.update(Int64(clamping: done.completedBytes)) }.path
        } catch {
            try? await opened.close()
            if let error = error as? StoreError, error.code == .assetUnavailable {
                throw CLIError("assetUnavailable: \(error.message)", exitCode: ExitStatus.finding)
            }
            if let error = error as? StoreError, error.code == .corruptAsset {
                throw CLIError("corruptAsset: \(error.message)", exitCode: ExitStatus.finding)
            }
            throw CLIError("cannot fetch \(reference.asset) from \(server): \(error)")
        }
        try await opened.close()
        try write(path, hash: hash)
    }

    /// Streams the file at `path` (`nil`: the empty asset) to the output, checking its hash.
    private func write(_ path: String?, hash: AssetHash) throws {
        guard let output else {
            let manifest = try stream(path) { FileHandle.standardOutput.write(Data($0)) }
            if let manifest, manifest.sha256 != hash {
                throw CLIError("corruptAsset: the store's copy of asset \(hash) is damaged (its bytes hash to \(manifest.sha256)); what was written is not the asset — run `strata verify \(store) --repair`",
                               exitCode: ExitStatus.finding)
            }
            return
        }
        let temporary = output + ".strata-\(UUID().uuidString).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: nil), let handle = FileHandle(forWritingAtPath: temporary) else {
            throw CLIError("cannot write \(output)")
        }
        do {
            let manifest = try stream(path) { try handle.write(contentsOf: Data($0)) }
            try handle.close()
            if let manifest, manifest.sha256 != hash {
                throw CLIError("corruptAsset: the store's copy of asset \(hash) is damaged (its bytes hash to \(manifest.sha256)); \(output) was not written — run `strata verify \(store) --repair`",
                               exitCode: ExitStatus.finding)
            }
            // rename(2) replaces an existing output in one step. FileManager.replaceItemAt on Linux
            // removed the old file, then failed ("The file doesn't exist"): a second get to the
            // same --output exited 2 and left no file at all.
            guard rename(temporary, output) == 0 else {
                throw CLIError("cannot write \(output): \(String(cString: strerror(errno)))")
            }
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: temporary)
            if let error = error as? CLIError { throw error }
            throw CLIError("cannot write \(output): \(error)")
        }
    }

    private func stream(_ path: String?, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws -> AssetManifest? {
        guard let path else { return nil }
        do {
            return try Store.hashAssetFile(at: path, each: sink)
        } catch let error as StoreError {
            throw CLIError("\(error.code.name): \(error.message)")
        }
    }
}

/// `strata asset list STORE [--json]`: every asset the objects name or the store holds.
struct AssetListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the assets the store's objects name or it holds: hash, size, media type, where the bytes are, objects naming it."
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    struct Row: Codable, Hashable {
        var sha256: String
        var size: UInt64
        /// `nil` for a file no object names (its media type is in the references only).
        var mediaType: String?
        var fileName: String?
        /// local (the file is here), remote (fetched on demand), partial (a download under way).
        var state: String
        var objects: Int
    }

    func run() throws {
        let files = try StoreFiles(store)
        let inventory: AssetInventory
        do { inventory = try Store.assetInventory(ofStoreAt: store) } catch { throw CLIError("\(error)") }
        let loaded = try LoadedStore.load(files, start: .newest)
        if let warning = loaded.report.readWarning { StandardError.line(warning) }
        let references = AssetReferences(loaded.projection)
        var rows: [Row] = []
        for hash in Set(references.byHash.keys).union(inventory.objects.keys).sorted() {
            let reference = references.byHash[hash]
            let state = inventory.objects[hash] != nil || hash == Asset.empty.sha256 ? "local" : inventory.partials[hash] != nil ? "partial" : "remote"
            rows.append(Row(sha256: hash.hex, size: reference?.asset.byteCount ?? inventory.objects[hash]?.byteCount ?? 0,
                            mediaType: reference?.asset.mediaType, fileName: reference?.asset.fileName, state: state, objects: reference?.objects ?? 0))
        }
        if json {
            print(try JSONOutput.string(rows))
            return
        }
        for row in rows {
            print("\(row.sha256)  \(Format.right(Format.bytes(Int64(clamping: row.size)), 10))  \(Format.left(row.mediaType ?? "-", 24))  \(Format.left(row.state, 7))  \(row.objects) object(s)\(row.fileName.map { "  \"\($0)\"" } ?? "")")
        }
        if rows.isEmpty { print("(no assets)") }
    }
}
