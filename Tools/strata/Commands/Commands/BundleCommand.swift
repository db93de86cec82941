import ArgumentParser
import Foundation
import Strata
import StrataCore

/// `strata bundle STORE [--redact] [--key-file FILE] [--output FILE]`: one file holding a store's
/// history and state for someone else to debug, values replaced by keyed hashes with --redact.
struct BundleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bundle",
        abstract: "Write a store's history and state as one debug bundle file, with every value a user wrote replaced by a keyed hash (--redact).",
        discussion: """
        The bundle holds the log (every record, position and timestamp), snapshots, adopted states, identity and lineage, users, sync cursors, pins and download masks; no asset bytes. diff, replay, log, inspect, verify and merge --what-if read a bundle wherever they take a store.

        With --redact, every value is replaced by an HMAC-SHA-256 of it under a key that stays on this machine (--key-file; by default STORE/redaction.key, made on first use): equal values stay equal, so diffs and blame still work, and two bundles made with the same key compare value by value. Object IDs, references, names, clocks, sequences and users are kept.
        """
    )

    @OptionGroup var storeArgument: StoreArgument
    var store: String { storeArgument.store }

    @Option(name: .shortAndLong, help: "The bundle file to write. Default: STORE.strata-bundle next to the store.")
    var output: String?

    @Flag(help: "Replace every value with a keyed hash of it.")
    var redact = false

    @Option(help: "With --redact: the key (32 bytes, raw or as 64 hex digits); made when missing. Default: STORE/redaction.key.")
    var keyFile: String?

    @OptionGroup var outputFormat: JSONFlag
    var json: Bool { outputFormat.json }

    func validate() throws {
        if keyFile != nil && !redact { throw ValidationError("--key-file goes with --redact") }
    }

    func run() throws {
        _ = try StoreFiles(store)
        let path = output ?? (store.hasSuffix("/") ? String(store.dropLast()) : store) + ".strata-bundle"
        let redaction = try redact ? Self.redaction(keyFile: keyFile ?? store + "/redaction.key") : nil
        let started = Date()
        let manifest: DebugBundle.Manifest
        do {
            manifest = try DebugBundle.write(storeAt: store, to: path, redaction: redaction)
        } catch let error as StoreError {
            throw CLIError("cannot write the bundle of \(store): \(error.message)", exitCode: ExitStatus.usageOrIO)
        }
        let size = FileSize.of(path)
        let storeSize = FileSize.directory(store)
        if json {
            struct Report: Encodable {
                var bundle: String
                var bytes: Int64
                var storeBytes: Int64
                var seconds: Double
                var manifest: DebugBundle.Manifest
            }
            print(try JSONOutput.string(Report(bundle: path, bytes: size, storeBytes: storeSize, seconds: Date().timeIntervalSince(started), manifest: manifest)))
        } else {
            print("wrote \(path): \(manifest.files.count) files, \(Format.bytes(size)) (the store: \(Format.bytes(storeSize)))\(manifest.redacted ? ", values redacted with key \(manifest.keyID ?? "?")" : "")")
            if let torn = manifest.tornTail { print("left out a torn tail of the log: \(torn)") }
        }
    }

    /// The key in `file`, or a new one written there (readable by its owner only).
    static func redaction(keyFile file: String) throws -> ValueRedaction {
        var key: [UInt8]
        if FileManager.default.fileExists(atPath: file) {
            // An existing key is never replaced: bundles made with it stay comparable.
            guard let data = FileManager.default.contents(atPath: file) else { throw CLIError("cannot read the redaction key \(file)") }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if data.count == 32 {
                key = Array(data)
            } else if text.count == 64, let bytes = Hex.decode(text) {
                key = bytes
            } else {
                throw CLIError("\(file) is not a redaction key (32 bytes, or 64 hex digits)")
            }
        } else {
            key = ValueRedaction.newKey()
            let hex = Hex.encode(key) + "\n"
            guard FileManager.default.createFile(atPath: file, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CLIError("cannot write the new redaction key to \(file)")
            }
        }
        do {
            return try ValueRedaction(key: key)
        } catch {
            throw CLIError("\(file): \(error.message)")
        }
    }
}
