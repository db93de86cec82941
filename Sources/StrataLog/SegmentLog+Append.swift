import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentLog {
    /// Appends `entries` as one record: after any crash the record is either wholly in the log or
    /// wholly absent. Returns once the record is as durable as ``LogOptions/durability`` promises.
    ///
    /// Entries are framed and compressed on the caller's task, so concurrent appenders compress in
    /// parallel; in the durable modes the write and the sync happen on the log's writer queue.
    ///
    /// - Throws: ``LogError`` with ``LogError/Code/entryTooLarge`` or ``LogError/Code/recordTooLarge``
    ///   (nothing is written), ``LogError/Code/appenderFailed`` after a failed write or sync (the
    ///   log must be reopened; whether the failed record survived is unknown until then), or
    ///   ``LogError/Code/closed``.
    @discardableResult
    public func append(_ entries: [LogEntry]) async throws -> AppendResult {
        try await withCheckedThrowingContinuation { continuation in
            do {
                try submit(entries) { continuation.resume(with: $0) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Queues `entries` as one record and returns its positions at once, without waiting for
    /// durability; `completion` is called exactly once when the record is as durable as
    /// ``LogOptions/durability`` promises, or with the error that stopped it.
    ///
    /// Completions are called in position order: on the writer queue in the durable modes, and
    /// before `submit` returns with ``Durability/buffered``. This lets a caller that must assign
    /// positions in a critical section (a store committing transactions in order) do so without
    /// holding its lock across the sync.
    ///
    /// - Throws: what ``append(_:)`` throws for problems known at once; `completion` is then
    ///   never called.
    @discardableResult
    public func submit(_ entries: [LogEntry], completion: @escaping @Sendable (Result<AppendResult, LogError>) -> Void) throws -> Range<LogPosition> {
        if isShared {
            // Another process may have appended since: a turn appends after it.
            return try withTurn(appending: true) { turn in try turn.append(entries, completion: completion) }
        }
        let payload = try EncodedPayload(entries: entries, options: options)
        switch options.durability {
        case .buffered:
            return try appendBuffered(payload, completion: completion).positions
        case .fsyncPerRecord, .groupCommit:
            let (positions, start) = try state.withLock { s -> (Range<LogPosition>, Bool) in
                if let refusal = refusal(s) { throw refusal }
                let first = s.nextPosition
                s.nextPosition += LogPosition(payload.entryCount)
                let bytes = payload.record(firstPosition: first, logID: logID)
                s.pending.append(PendingAppend(bytes: bytes, positions: first..<s.nextPosition, completion: completion))
                if s.draining { return (first..<s.nextPosition, false) }
                s.draining = true
                return (first..<s.nextPosition, true)
            }
            if start { writerQueue.async { self.drain() } }
            return positions
        }
    }

    /// Appends one entry per payload, stamped with the current time.
    @discardableResult
    public func append(payloads: [[UInt8]]) async throws -> AppendResult {
        let now = currentLogTimestamp()
        return try await append(payloads.map { LogEntry($0, timestamp: now) })
    }

    /// Makes every record appended so far durable. Only needed with ``Durability/buffered``; in
    /// the other modes an append is durable when it returns.
    public func flush() async throws {
        try await onWriterQueue {
            try self.writer.withLock { w in
                if let refusal = self.state.withLock({ self.refusal($0) }) { throw refusal }
                // Shared: other processes' records in this file may not be synced yet.
                guard w.unsynced || self.isShared else { return }
                do {
                    try w.file.sync()
                    w.unsynced = false
                } catch let error as LogError {
                    throw self.fail(error)
                }
            }
        }
    }

    /// Finishes pending appends, makes everything durable, and releases the log for another
    /// opener. Later calls of any method throw ``LogError/Code/closed``. A log that failed (see
    /// ``LogError/Code/appenderFailed``) is released without a final sync.
    public func close() async throws {
        defer {
            state.withLock { $0.closed = true }
            commitLock?.close()
            lock.release()
        }
        do {
            try await flush()
        } catch let error as LogError where error.code == .closed || error.code == .appenderFailed {
            return
        }
    }

    /// Releases at once a log that nothing was appended to since it was opened (so nothing waits
    /// to be made durable): for an opener that fails after opening it and cannot wait for
    /// ``close()`` (a synchronous initializer). Later calls of any method throw
    /// ``LogError/Code/closed``.
    package func releaseUnwritten() {
        state.withLock { $0.closed = true }
        commitLock?.close()
        lock.release()
    }

    // MARK: Internals

    func refusal(_ s: SharedState) -> LogError? {
        if s.closed { return LogError(.closed, "the log is closed", file: directory) }
        return s.failure
    }

    /// Records the first write or sync failure: from now on every append is refused. After a
    /// failed fsync the kernel may have dropped the dirty pages, so retrying could report success
    /// for bytes that are gone; only a reopen (which re-reads the file) is safe.
    func fail(_ error: LogError) -> LogError {
        let failure = LogError(.appenderFailed, "appends refused until the log is reopened: \(error.message)",
                               file: error.file, offset: error.offset, errno: error.errno)
        state.withLock { s in if s.failure == nil { s.failure = failure } }
        return failure
    }

    /// Writes a record in the caller's thread. The completion runs under the writer lock, so that
    /// completions of concurrent appends keep position order.
    private func appendBuffered(_ payload: EncodedPayload, completion: (Result<AppendResult, LogError>) -> Void) throws -> AppendResult {
        try writer.withLock { w in
            let (first, bytes) = try state.withLock { s -> (LogPosition, [UInt8]) in
                if let refusal = refusal(s) { throw refusal }
                let first = s.nextPosition
                s.nextPosition += LogPosition(payload.entryCount)
                return (first, payload.record(firstPosition: first, logID: logID))
            }
            do {
                try write(bytes, into: &w, syncBeforeRoll: false)
                w.unsynced = true
                publish(w)
            } catch let error as LogError {
                throw fail(error)
            }
            let result = AppendResult(positions: first..<first + LogPosition(payload.entryCount), storedSize: bytes.count)
            completion(.success(result))
            return result
        }
    }

    /// The writer queue's loop: takes the pending appends (all of them with group commit, one with
    /// fsync per record), writes them, syncs once, publishes them to readers and resumes their
    /// appenders. Appends that arrive during the sync form the next group.
    private func drain() {
        var lastGroup = 0
        var lastSync: Duration = .zero
        let clock = ContinuousClock()
        while true {
            if options.durability == .groupCommit && lastGroup > 1 {
                awaitStragglers(expected: lastGroup, within: lastSync)
            } else if lastGroup > 0 {
                // An appender just resumed usually submits its next record within microseconds;
                // catching it here saves the queue's wake-up (tens of µs) on every record.
                awaitStragglers(expected: 1, within: .microseconds(200), spin: true)
            }
            let batch = state.withLock { s -> [PendingAppend] in
                if s.pending.isEmpty {
                    s.draining = false
                    return []
                }
                if options.durability == .fsyncPerRecord { return [s.pending.removeFirst()] }
                defer { s.pending.removeAll(keepingCapacity: true) }
                return s.pending
            }
            if batch.isEmpty { return }
            let outcome: Result<Void, LogError> = writer.withLock { w in
                if let failure = state.withLock({ $0.failure }) { return .failure(failure) }
                do {
                    if batch.count == 1 {
                        try write(batch[0].bytes, into: &w, syncBeforeRoll: true)
                    } else {
                        try writeGroup(batch, into: &w)
                    }
                    let started = clock.now
                    try w.file.sync()
                    lastSync = clock.now - started
                    w.unsynced = false
                    publish(w)
                    return .success(())
                } catch let error as LogError {
                    return .failure(fail(error))
                } catch {
                    return .failure(fail(LogError(.io, "\(error)", file: directory)))
                }
            }
            lastGroup = batch.count
            switch outcome {
            case .success:
                options.commitObserver?.committed(entries: batch.reduce(0) { $0 + $1.positions.count }, sync: lastSync)
                for append in batch {
                    append.completion(.success(AppendResult(positions: append.positions, storedSize: append.bytes.count)))
                }
            case .failure(let error):
                for append in batch { append.completion(.failure(error)) }
            }
        }
    }

    /// The appenders just resumed usually come straight back with their next record. Starting
    /// the next sync at once would catch only the ones that arrived during the last sync, and the
    /// appenders would settle into two halves taking turns (half the possible group size). So,
    /// as PostgreSQL's commit_delay does, wait a little — at most a quarter of the last sync's
    /// duration, capped at 1 ms — for as many appends as the last group had.
    private func awaitStragglers(expected: Int, within lastSync: Duration, spin: Bool = false) {
        let budget = spin ? lastSync : min(lastSync / 4, .milliseconds(1))
        guard budget > .microseconds(5) else { return }
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        while state.withLock({ $0.pending.count }) < expected && clock.now < deadline {
            if spin { sched_yield() } else { usleep(20) }
        }
    }

    /// Writes a group with as few system calls as possible: consecutive records that fit in the
    /// active segment go out in one `pwrite`.
    private func writeGroup(_ batch: [PendingAppend], into w: inout WriterState) throws {
        var run: [UInt8] = []
        for append in batch {
            if needsRoll(w, adding: run.count + append.bytes.count) {
                if !run.isEmpty { try commitRun(&run, into: &w) }
                if w.summary.recordCount > 0 && needsRoll(w, adding: append.bytes.count) {
                    try roll(&w, syncFirst: true)
                }
            }
            run.append(contentsOf: append.bytes)
        }
        if !run.isEmpty { try commitRun(&run, into: &w) }
    }

    private func commitRun(_ run: inout [UInt8], into w: inout WriterState) throws {
        try w.file.write(run, at: w.summary.length)
        try account(run, at: w.summary.length, into: &w)
        run.removeAll(keepingCapacity: true)
    }

    /// Writes one record at the end of the active segment, rolling to a new segment first when it
    /// would not fit (a record larger than a whole segment gets a segment of its own).
    func write(_ bytes: [UInt8], into w: inout WriterState, syncBeforeRoll: Bool) throws {
        if needsRoll(w, adding: bytes.count) && w.summary.recordCount > 0 {
            try roll(&w, syncFirst: syncBeforeRoll)
        }
        try w.file.write(bytes, at: w.summary.length)
        try account(bytes, at: w.summary.length, into: &w)
    }

    private func needsRoll(_ w: WriterState, adding count: Int) -> Bool {
        w.summary.length + Int64(count) > Int64(options.segmentSize)
    }

    /// Adds the records in `bytes` (just written at `offset`) to the writer's summary.
    private func account(_ bytes: [UInt8], at offset: Int64, into w: inout WriterState) throws {
        var at = 0
        try bytes.withUnsafeBytes { raw in
            while at < raw.count {
                guard case .success(let header) = RecordHeader.parse(UnsafeRawBufferPointer(rebasing: raw[at..<min(raw.count, at + RecordHeader.size)])) else {
                    throw LogError(.io, "internal: written record does not parse", file: w.file.path, offset: offset + Int64(at))
                }
                w.summary.add(header, at: offset + Int64(at), interval: options.indexInterval)
                at += Int(header.length)
            }
        }
    }

    /// Seals the active segment (its sync first, in the durable modes, so that a later segment
    /// never holds durable records while an earlier one does not) and starts the next one.
    private func roll(_ w: inout WriterState, syncFirst: Bool) throws {
        if syncFirst || w.unsynced { try w.file.sync() }
        w.unsynced = false
        publish(w)
        // The index is a cache: written atomically, rebuilt on open when missing or wrong.
        try? FileSystem.writeAtomically(w.summary.encoded(logID: logID),
                                        to: FileSystem.join(directory, SegmentName.indexName(for: w.summary.firstPosition)),
                                        durable: false)
        let first = w.summary.endPosition
        let name = try SegmentLog.createSegment(directory: directory, logID: logID, first: first, created: options.fileTimestamp)
        let path = FileSystem.join(directory, name)
        let file = try FileHandle.open(path, write: true)
        w = WriterState(file: file, summary: SegmentSummary(firstPosition: first), segmentName: name)
        state.withLock { s in
            s.segments.append(Segment(name: name, path: path, summary: w.summary, verified: true))
        }
    }

    /// Makes the writer's progress visible to readers.
    func publish(_ w: WriterState) {
        state.withLock { s in
            let last = s.segments.count - 1
            if s.segments[last].name == w.segmentName { s.segments[last].summary = w.summary }
        }
    }

    func onWriterQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            writerQueue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
