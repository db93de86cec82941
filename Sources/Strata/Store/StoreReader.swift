import Foundation
import Synchronization
import StrataLog
public import StrataCore

/// A store opened read-only from another process — a widget, a share extension, the command line
/// tool while the app runs — beside the process that holds it for writing.
///
/// ```swift
/// let reader = try StoreReader.open(at: sharedContainer + "/notes")
/// let notes = try reader.fetch(Note.self, sortedBy: [SortKey("title")])
/// try reader.refresh()      // the writer's commits since
/// ```
///
/// It takes no lock and writes nothing: it loads the newest snapshot, replays the log after it,
/// and ``refresh()`` follows what the writer appends (`LogTail` (StrataLog)), as far as whole records are on
/// disk — with `Durability.buffered`, what the writer has handed to the file system. When the
/// writer compacts away history the reader has not read yet, or forks (its lineage changes which
/// transactions count), the reader loads again from the newest snapshot. The schema is the one
/// recorded in the store's log, so the reader needs none of the app's code.
public final class StoreReader: Sendable {
    /// The store's directory.
    public let directory: String
    private let state: Mutex<State>

    private struct State {
        var projection: Projection
        var tail: LogTail
        var identity: StoreIdentity
    }

    private init(directory: String, state: sending State) {
        self.directory = directory
        self.state = Mutex(state)
    }

    /// Opens the store at `directory` for reading.
    ///
    /// - Throws: `StoreError` when the directory is not a store or its files do not read (with
    ///   the file and offset).
    public static func open(at directory: String) throws -> StoreReader {
        StoreReader(directory: directory, state: try load(directory))
    }

    /// The log position the reader has read up to (the next transaction's).
    public var position: UInt64 { state.withLock { $0.tail.nextPosition } }

    /// Applies the transactions the writer committed since the last refresh; returns how many.
    ///
    /// - Throws: `StoreError` when the store's files do not read; the reader keeps the state it
    ///   had.
    @discardableResult
    public func refresh() throws -> Int {
        try state.withLock { state in
            let identity = try Store.identity(ofStoreAt: directory)
            // A fork changes which of the log's transactions count: start again.
            if identity.lineage != state.identity.lineage {
                state = try Self.load(directory)
                return 1
            }
            do {
                return try Self.apply(try state.tail.read(), to: state.projection, identity: identity, adopted: AdoptedStates(storeDirectory: directory))
            } catch let error as LogError where error.code == .positionOutOfRange {
                state = try Self.load(directory)
                return 1
            } catch is StoreError {
                // Applying failed part way (an adopted state compaction has since removed, a
                // record the writer's fork rewrote): the tail has moved past what was read, so
                // the state read so far would silently lack it. Start again from the files.
                state = try Self.load(directory)
                return 1
            } catch let error as LogError {
                throw StoreError(.storeFailed, "cannot read the log of \(directory)", logError: error)
            }
        }
    }

    /// Runs `body` with a view of the state read so far (see ``Store/read(_:)``).
    public func read<T>(_ body: (StoreView) throws -> T) rethrows -> T {
        let view = StoreView(projection: state.withLock { $0.projection.frozenCopy() })
        return try body(view)
    }

    /// The object with this ID, or `nil`.
    public func object(_ id: ObjectID) -> ObjectSnapshot? { read { $0.object(id) } }

    /// The existing objects of `entity` that match `predicate`, sorted by `sort` (then by ID).
    public func fetch(_ entity: String, where predicate: ((ObjectSnapshot) -> Bool)? = nil,
                      sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        read { $0.fetch(entity, where: predicate, sortedBy: sort, limit: limit) }
    }

    /// The existing objects of `entity` that match `filter`, sorted by `sort` (then by ID).
    public func fetch(_ entity: String, matching filter: Filter, sortedBy sort: [SortKey] = [], limit: Int? = nil) -> [ObjectSnapshot] {
        read { $0.fetch(entity, matching: filter, sortedBy: sort, limit: limit) }
    }

    /// The objects of `M`'s entity as models.
    public func fetch<M: StrataModel>(_ type: M.Type, where predicate: ((M) -> Bool)? = nil,
                                      sortedBy sort: [SortKey] = [], limit: Int? = nil) throws -> [M] {
        try read { try $0.fetch(type, where: predicate, sortedBy: sort, limit: limit) }
    }

    /// The digest of the state read so far (equal to the writer's once the reader has caught up).
    public func digest() -> String { read { $0.digest() } }

    // MARK: Loading

    private static func load(_ directory: String) throws -> sending State {
        let identity = try Store.identity(ofStoreAt: directory)
        let logDirectory = Store.logDirectory(ofStoreAt: directory)
        let log: LogIdentity
        do {
            log = try SegmentLog.identity(at: logDirectory)
        } catch let error as LogError {
            throw StoreError(.storeFailed, "cannot read the log of \(directory)", logError: error)
        }
        // The newest snapshot that reads and that no fork tainted; else the whole log.
        var projection = Projection()
        var start: UInt64 = 0
        for info in log.snapshots where info.position >= log.startPosition && !identity.isTainted(snapshotAt: info.position) {
            guard let snapshot = try? SegmentLog.readSnapshot(info, logID: log.logID),
                  let builder = try? ProjectionBuilder(snapshot: snapshot.payload, identity: identity) else { continue }
            projection = builder.projection
            start = info.position
            break
        }
        if start == 0 && log.startPosition > 0 {
            throw StoreError(.storeFailed, "no readable snapshot covers the history before position \(log.startPosition) of \(directory)")
        }
        let tail = LogTail(directory: logDirectory, from: start)
        do {
            _ = try apply(try tail.read(), to: projection, identity: identity, adopted: AdoptedStates(storeDirectory: directory))
        } catch let error as LogError {
            throw StoreError(.storeFailed, "cannot read the log of \(directory)", logError: error)
        }
        return State(projection: projection, tail: tail, identity: identity)
    }

    /// Applies log entries (skipping what a fork abandoned); returns the transactions applied.
    private static func apply(_ entries: [StoredEntry], to projection: Projection, identity: StoreIdentity, adopted: AdoptedStates) throws -> Int {
        guard !entries.isEmpty else { return 0 }
        projection.beginBatch(tracking: false)
        defer {
            projection.commitBatch(report: false)
            projection.schema = projection.recordedSchema
        }
        var applied = 0
        for entry in entries {
            if AdoptionRecord.isAdoption(entry.payload) {
                // A state the writer adopted: merged here as it was there.
                let record = try AdoptionRecord(decoding: entry.payload, position: entry.position)
                try projection.adopt(payload: adopted.payload(for: record, position: entry.position))
                applied += 1
                continue
            }
            let transaction = try EventCodec.decodeRaw(entry.payload, position: entry.position)
            if !identity.lineage.isEmpty,
               identity.isAbandoned(header: try TransactionHeader(decoding: entry.payload, position: entry.position), position: entry.position) { continue }
            _ = try projection.apply(transaction)
            applied += 1
        }
        return applied
    }
}
