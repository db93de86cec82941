/// A file read and written at offsets, with a durable sync: the log's own file handle, for the
/// modules above that keep files beside the log (a store's asset files). Every call throws a
/// ``LogError`` of code `io` naming the file and, where there is one, the offset.
package struct PositionalFile: Sendable {
    private let handle: FileHandle

    /// The file's path as opened.
    package var path: String { handle.path }

    /// Opens `path`; `create` makes it when missing, `exclusive` refuses an existing one.
    package static func open(_ path: String, write: Bool, create: Bool = false, exclusive: Bool = false) throws -> PositionalFile {
        PositionalFile(handle: try FileHandle.open(path, write: write, create: create, exclusive: exclusive))
    }

    /// The file's size in bytes.
    package func size() throws -> Int64 { try handle.size() }

    /// Reads up to `buffer.count` bytes at `offset`; fewer only at the end of the file.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        try handle.read(into: buffer, at: offset)
    }

    /// Exactly `count` bytes at `offset`, or fewer at the end of the file.
    package func read(count: Int, at offset: Int64) throws -> [UInt8] { try handle.read(count: count, at: offset) }

    /// Writes all of `bytes` at `offset`.
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws { try handle.write(bytes, at: offset) }

    /// Writes all of `bytes` at `offset`.
    package func write(_ bytes: [UInt8], at offset: Int64) throws { try handle.write(bytes, at: offset) }

    /// Makes the file's data and size durable.
    package func sync() throws { try handle.sync() }

    /// Cuts or extends the file to `size` bytes.
    package func truncate(to size: Int64) throws { try handle.truncate(to: size) }
}

extension FileSystem {
    /// Renames `from` to `to` (replacing `to`); durable once the directory is synced.
    package static func move(_ from: String, to: String) throws { try rename(from, to) }

    /// The size of the file at `path`, or `nil` when there is none.
    package static func fileSize(_ path: String) -> Int64? {
        guard let file = try? FileHandle.open(path, write: false) else { return nil }
        return try? file.size()
    }
}

extension FileSystem {
    /// ``writeAtomically(_:to:durable:mode:)`` through a temporary name of its own (`path`,
    /// a random suffix, `.tmp`), for files several writers may write at once with the same
    /// contents (an asset's manifest, a link): with one shared temporary name, one writer could
    /// rename the other's half-written file into place.
    package static func writeAtomicallyUnique(_ bytes: [UInt8], to path: String) throws {
        var random = SystemRandomNumberGenerator()
        let temporary = path + "." + String(random.next(), radix: 16) + ".tmp"
        do {
            let file = try FileHandle.open(temporary, write: true, create: true, exclusive: true)
            try file.write(bytes, at: 0)
            try file.sync()
            try rename(temporary, path)
            try syncDirectory(parentPath(path))
        } catch {
            try? remove(temporary)
            throw error
        }
    }
}
