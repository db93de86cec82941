import StrataLog

/// The states a store adopted, kept beside its log (`adopted/<sha256>.state` in the store
/// directory) for as long as an `AdoptionRecord` in the retained log names them.
///
/// Content-addressed: a file's name is the SHA-256 of its bytes, so a reader checks that what it
/// loads is what the log entry names, and writing the same state twice is harmless. A state is
/// written (temporary file, fsync, rename, fsync of the folder) *before* the log entry that names
/// it is appended, and no compaction (which prunes the states no entry names) runs in between: a
/// crash in between leaves a file no entry names (removed by the next compaction), never an entry
/// naming a missing state.
package struct AdoptedStates: Sendable {
    package static let folderName = "adopted"
    /// The folder (`STORE/adopted`).
    package let directory: String

    /// The adopted states of the store at `storeDirectory`.
    package init(storeDirectory: String) {
        directory = storeDirectory + "/" + Self.folderName
    }

    /// The adopted states of the store whose log is at `logDirectory` (`STORE/log`).
    package init(logDirectory: String) {
        var parts = logDirectory.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count > 1 { parts.removeLast() }
        let store = parts.joined(separator: "/")
        self.init(storeDirectory: store.isEmpty ? "." : store)
    }

    package func path(of contentHash: String) -> String {
        directory + "/" + contentHash + ".state"
    }

    /// Keeps `payload` durably; returns its content hash.
    ///
    /// - Throws: ``StoreError/Code/storeFailed`` when it cannot be written.
    @discardableResult
    package func keep(_ payload: [UInt8]) throws -> String {
        let hash = AdoptionRecord.contentHash(of: payload)
        do {
            if !FileSystem.isDirectory(directory) {
                try FileSystem.makeDirectory(directory)
            }
            try FileSystem.writeAtomically(payload, to: path(of: hash))
        } catch {
            throw StoreError(.storeFailed, "cannot keep an adopted state in \(directory): \(error)")
        }
        return hash
    }

    /// The payload an adoption record names, checked against its hash and size.
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` naming the file (and the log position of
    ///   the record) when it is missing, damaged or not the state the record names.
    package func payload(for record: AdoptionRecord, position: UInt64?) throws -> [UInt8] {
        let file = path(of: record.contentHash)
        let bytes: [UInt8]?
        do {
            bytes = try FileSystem.read(file)
        } catch {
            throw StoreError(.corruptSnapshot, "cannot read the adopted state \(file): \(error)", position: position)
        }
        guard let bytes else {
            throw StoreError(.corruptSnapshot, "the adopted state \(file) that the log names is missing", position: position)
        }
        guard UInt64(bytes.count) == record.size, AdoptionRecord.contentHash(of: bytes) == record.contentHash else {
            throw StoreError(.corruptSnapshot, "the adopted state \(file) is damaged (its bytes do not hash to its name)", position: position)
        }
        return bytes
    }

    /// The content hashes of the states kept.
    package func kept() -> [String] {
        let names = (try? FileSystem.list(directory)) ?? []
        return names.filter { $0.hasSuffix(".state") }.map { String($0.dropLast(6)) }.sorted()
    }

    /// Whether the folder holds anything (a state, or a temporary file of an interrupted write).
    package var isEmpty: Bool {
        ((try? FileSystem.list(directory)) ?? []).isEmpty
    }

    /// Removes the states no record in `referenced` names (after compaction retired the log
    /// entries that named them, the snapshot holds their effect).
    package func prune(keeping referenced: Set<String>, only: String? = nil) throws {
        for hash in kept() where !referenced.contains(hash) && (only == nil || only == hash) {
            do {
                try FileSystem.remove(path(of: hash))
            } catch {
                throw StoreError(.storeFailed, "cannot remove the adopted state \(path(of: hash)): \(error)")
            }
        }
        // Temporary files of writes a crash or a full disk interrupted (never named by a record:
        // a state is renamed into place before its record is appended).
        for name in (try? FileSystem.list(directory)) ?? [] where name.hasSuffix(".tmp") {
            try? FileSystem.remove(directory + "/" + name)
        }
    }
}
