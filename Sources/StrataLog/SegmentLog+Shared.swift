import Dispatch
import Synchronization

/// One process's turn at a log shared by several writer processes (``LogSharing/processes``):
/// what the others appended since this process's last turn, and its own appends, which land
/// right after them. Valid only inside ``SegmentLog/withTurn(appending:_:)``'s body.
///
/// The body decides what to append knowing everything before it — a store applies the others'
/// transactions to its projection first, so that its own validation, sequence numbers and clock
/// follow theirs.
///
/// `@unchecked Sendable`: it lives only for the body of the turn, on the thread that holds the
/// log's writer lock, and is used by nothing else.
public final class LogTurn: @unchecked Sendable {
    /// The entries other processes appended since this process last looked, in position order.
    public let appendedByOthers: [StoredEntry]
    /// The position the next ``append(_:completion:)`` of this turn gets.
    public private(set) var nextPosition: LogPosition
    let appending: Bool
    let options: LogOptions
    let logID: LogID
    let directory: String
    var records: [[UInt8]] = []
    var waiters: [TurnWaiter] = []

    init(others: [StoredEntry], next: LogPosition, appending: Bool, log: SegmentLog) {
        self.appendedByOthers = others
        self.nextPosition = next
        self.appending = appending
        self.options = log.options
        self.logID = log.logID
        self.directory = log.directory
    }

    /// Appends `entries` as one record after everything before it (written when the body
    /// returns, before the commit lock is released). `completion` is called once the record is as
    /// durable as ``LogOptions/durability`` promises, in position order with the turns' other
    /// completions.
    ///
    /// - Throws: ``LogError/Code/invalidArgument`` in a turn that does not append;
    ///   ``LogError/Code/entryTooLarge`` or ``LogError/Code/recordTooLarge`` (nothing written).
    @discardableResult
    public func append(_ entries: [LogEntry], completion: @escaping @Sendable (Result<AppendResult, LogError>) -> Void) throws -> Range<LogPosition> {
        guard appending else {
            throw LogError(.invalidArgument, "a turn that only follows the other processes cannot append", file: directory)
        }
        let payload = try EncodedPayload(entries: entries, options: options)
        let first = nextPosition
        nextPosition += LogPosition(payload.entryCount)
        let bytes = payload.record(firstPosition: first, logID: logID)
        records.append(bytes)
        waiters.append(TurnWaiter(positions: first..<nextPosition, storedSize: bytes.count, completion: completion))
        return first..<nextPosition
    }

    /// Calls `completion` once everything before it — this process's earlier appends — is
    /// durable, in position order with the appends' completions: how a store hands the others'
    /// records to its observers in the order of the log.
    public func afterEarlierAppends(_ completion: @escaping @Sendable () -> Void) {
        waiters.append(TurnWaiter(positions: nextPosition..<nextPosition, storedSize: 0, completion: { _ in completion() }))
    }
}

/// A completion waiting for the sync after a turn's write.
struct TurnWaiter: Sendable {
    var positions: Range<LogPosition>
    var storedSize: Int
    var completion: @Sendable (Result<AppendResult, LogError>) -> Void
}

extension SegmentLog {
    /// Whether several processes share this log (``LogSharing/processes``).
    public var isShared: Bool { commitLock != nil }

    /// The end of what is durable: ``endPosition`` for an exclusive log (which publishes records
    /// once synced); for a shared log, the end as of this process's last completed sync — the
    /// records it or another process wrote since may not be synced yet. What may be sent off the
    /// device (a push) ends here.
    public var durableEndPosition: LogPosition {
        guard isShared else { return endPosition }
        return state.withLock { s in min(s.durableEnd, s.segments[s.segments.count - 1].summary.endPosition) }
    }

    /// Takes this process's turn at a shared log: reads the records other processes appended
    /// since the last turn (``LogTurn/appendedByOthers``), runs `body`, and writes what it
    /// appended at the end. With `appending`, the whole turn holds the cross-process commit
    /// lock, and a torn record a killed process left at the end is cut off first; without, the
    /// turn only follows the others (records still being written are left for the next turn).
    ///
    /// The sync happens after the lock is released, on the log's writer queue: turns of one
    /// process that arrive during a sync share the next one (group commit), and processes sync
    /// side by side.
    ///
    /// - Throws: ``LogError/Code/invalidArgument`` for an exclusive log; format errors (with file
    ///   and offset) for damage before the end; ``LogError/Code/appenderFailed`` after a failed
    ///   write or sync; what `body` throws (nothing of the turn is written then).
    public func withTurn<T: Sendable>(appending: Bool, _ body: (LogTurn) throws -> T) throws -> T {
        guard let commitLock else {
            throw LogError(.invalidArgument, "withTurn is for a log opened with LogSharing.processes", file: directory)
        }
        return try writer.withLock { w -> T in
            if let refusal = state.withLock({ refusal($0) }) { throw refusal }
            func turn(_ w: inout WriterState) throws -> T {
                let others: [StoredEntry]
                do {
                    others = try follow(&w, locked: appending)
                } catch {
                    // The view may have moved past records it did not return: appending after
                    // them, or following on, would skip them. Refused until a reopen.
                    throw fail(error as? LogError ?? LogError(.io, "\(error)", file: directory))
                }
                let turn = LogTurn(others: others, next: w.summary.endPosition, appending: appending, log: self)
                let value: T
                do {
                    value = try body(turn)
                } catch {
                    // Nothing of the turn is written, but the others' records were read: their
                    // notices (a store's observers learning of them) still go out, in order.
                    turn.records.removeAll()
                    turn.waiters.removeAll { !$0.positions.isEmpty }
                    finish(turn, into: &w)
                    throw error
                }
                finish(turn, into: &w)
                return value
            }
            return appending ? try commitLock.withLock { try turn(&w) } : try turn(&w)
        }
    }

    /// Whether another process may have appended since this process last looked: the active
    /// segment is longer than this process has read, or a segment follows it. Cheap (two `stat`s,
    /// no lock held across them), so a watcher can skip the turn when its notification was this
    /// process's own write. A `true` may be stale; a `false` is never wrong for long, because the
    /// other process's write notifies again.
    public func othersMayHaveAppended() -> Bool {
        guard isShared else { return false }
        let (path, length, end) = state.withLock { s -> (String, Int64, LogPosition) in
            let last = s.segments[s.segments.count - 1]
            return (last.path, last.summary.length, last.summary.endPosition)
        }
        guard let size = FileSystem.size(path) else { return true }
        if size != length { return true }
        let next = SegmentName.name(for: end)
        return next != FileSystem.baseName(path) && FileSystem.exists(FileSystem.join(directory, next))
    }

    /// Writes a turn's records and queues its completions for the next sync. A failed write fails
    /// the log (as in the exclusive modes) and the turn's completions get the error.
    private func finish(_ turn: LogTurn, into w: inout WriterState) {
        guard !turn.waiters.isEmpty else { return }
        do {
            for record in turn.records {
                try write(record, into: &w, syncBeforeRoll: options.durability != .buffered)
                w.unsynced = true
            }
        } catch {
            let failure = fail(error as? LogError ?? LogError(.io, "\(error)", file: directory))
            for waiter in turn.waiters { waiter.completion(.failure(failure)) }
            return
        }
        publish(w)
        state.withLock { $0.nextPosition = w.summary.endPosition }
        if options.durability == .buffered {
            // Durable enough once written; called here, under the writer lock, in order.
            for waiter in turn.waiters {
                waiter.completion(.success(AppendResult(positions: waiter.positions, storedSize: waiter.storedSize)))
            }
            return
        }
        let start = state.withLock { s -> Bool in
            s.turnWaiters.append(contentsOf: turn.waiters)
            if s.draining { return false }
            s.draining = true
            return true
        }
        if start { writerQueue.async { self.drainTurns() } }
    }

    /// Syncs the active segment for the waiting turns, one sync for all that arrived during the
    /// previous one, and calls their completions in order. The sync runs outside the writer
    /// lock, so turns go on writing meanwhile (their completions wait for the next round).
    private func drainTurns() {
        while true {
            let batch = state.withLock { s -> [TurnWaiter] in
                if s.turnWaiters.isEmpty {
                    s.draining = false
                    return []
                }
                defer { s.turnWaiters.removeAll(keepingCapacity: true) }
                return s.turnWaiters
            }
            if batch.isEmpty { return }
            // Every record of the batch is in this file or in an earlier segment, which was
            // synced before the roll that sealed it (ours, or another process's).
            let (file, needed, end) = writer.withLock { w -> (FileHandle, Bool, LogPosition) in
                defer { w.unsynced = false }
                return (w.file, w.unsynced, w.summary.endPosition)
            }
            var outcome: Result<Void, LogError> = state.withLock { $0.failure }.map { .failure($0) } ?? .success(())
            if case .success = outcome, needed {
                let started = ContinuousClock.now
                do {
                    try file.sync()
                    options.commitObserver?.committed(entries: batch.reduce(0) { $0 + $1.positions.count }, sync: ContinuousClock.now - started)
                } catch {
                    outcome = .failure(fail(error as? LogError ?? LogError(.io, "\(error)", file: file.path)))
                }
            }
            if case .success = outcome {
                state.withLock { $0.durableEnd = max($0.durableEnd, end) }
            }
            for waiter in batch {
                waiter.completion(outcome.map { AppendResult(positions: waiter.positions, storedSize: waiter.storedSize) })
            }
        }
    }

    /// Reads the records other processes appended past this process's view, following them into
    /// the segments they started, and moves the view to the end. `locked` (the commit lock is
    /// held, so nobody is mid-append): bytes past the last whole record are a torn record of a
    /// process that died appending, and are cut off; otherwise they are a record still being
    /// written, left for later.
    private func follow(_ w: inout WriterState, locked: Bool) throws -> [StoredEntry] {
        var entries: [StoredEntry] = []
        while true {
            let size = try w.file.size()
            if size > w.summary.length {
                var scanner = SegmentScanner(file: w.file, logID: logID, limit: size, offset: w.summary.length,
                                             expectedPosition: w.summary.endPosition,
                                             readAhead: Int(min(size - w.summary.length, 1 << 20)))
                scanning: while true {
                    switch try scanner.next() {
                    case .record(let header, let offset, let stored):
                        switch RecordDecoder.entries(header: header, stored: stored) {
                        case .failure(let violation):
                            throw LogError(.corruptRecord, violation.description, file: w.file.path, offset: offset)
                        case .success(let decoded):
                            entries.append(contentsOf: decoded)
                        }
                        w.summary.add(header, at: offset, interval: options.indexInterval)
                        // Perhaps not synced by its writer yet: the next drain syncs it before
                        // this process hands it on (observers, the durable end sync pushes from).
                        w.unsynced = true
                    case .end:
                        break scanning
                    case .damaged(let offset, let reason):
                        let later = SegmentName.name(for: w.summary.endPosition)
                        if later != w.segmentName, FileSystem.exists(FileSystem.join(directory, later)) {
                            // The writer went on in a later segment: these bytes never become a record.
                            throw LogError(.corruptRecord, reason, file: w.file.path, offset: offset)
                        }
                        // Unlocked: a record another process is still writing.
                        guard locked else { break scanning }
                        guard !(try scanner.validRecordExists(after: offset)) else {
                            throw LogError(.corruptRecord, reason, file: w.file.path, offset: offset)
                        }
                        // A process died part way through its append (it never acknowledged it):
                        // cut the torn bytes off durably, as an open would.
                        try w.file.truncate(to: offset)
                        try w.file.sync()
                        break scanning
                    }
                }
            }
            let next = SegmentName.name(for: w.summary.endPosition)
            guard next != w.segmentName, FileSystem.exists(FileSystem.join(directory, next)) else { break }
            // Another process sealed this segment and went on in the next. It synced it first
            // unless its durability is buffered: synced here, so that nothing durable in the
            // next segment ever sits behind a gap.
            try w.file.sync()
            w.unsynced = false
            publish(w)
            let path = FileSystem.join(directory, next)
            let file = try FileHandle.open(path, write: true)
            let header = try file.read(count: SegmentHeader.size, at: 0).withUnsafeBytes { try SegmentHeader.decode($0, file: path) }
            guard header.logID == logID, header.firstPosition == w.summary.endPosition else {
                throw LogError(.positionMismatch, "segment \(next) does not continue \(w.segmentName) (log \(header.logID), first position \(header.firstPosition))", file: path, offset: 16)
            }
            w = WriterState(file: file, summary: SegmentSummary(firstPosition: header.firstPosition), segmentName: next)
            let summary = w.summary
            state.withLock { $0.segments.append(Segment(name: next, path: path, summary: summary, verified: true)) }
        }
        publish(w)
        let end = w.summary.endPosition
        state.withLock { $0.nextPosition = max($0.nextPosition, end) }
        return entries
    }
}
