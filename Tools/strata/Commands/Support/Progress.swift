#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// Progress of long work (verify, replay, diff, compact on a big store) on standard error — only
/// when it is a terminal, so piped output stays exactly the data.
/// Thread-safe: `diff` reads two stores at once and both report here, each in its own slot.
final class Progress: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Int: Int64] = [:]
    private let label: String
    private let total: Int64
    private let enabled: Bool
    private var lastDraw: UInt64 = 0
    private var drawn = false

    /// - Parameters:
    ///   - total: the amount of work (bytes to read, for instance); 0 when unknown.
    ///   - enabled: `nil` decides by whether standard error is a terminal.
    init(_ label: String, total: Int64, enabled: Bool? = nil) {
        self.label = label
        self.total = total
        self.enabled = enabled ?? (isatty(STDERR_FILENO) == 1)
    }

    /// Called often with the work done so far in `slot`; redraws at most ten times a second.
    func update(_ doneInSlot: Int64, slot: Int = 0) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        slots[slot] = doneInSlot
        let done = slots.values.reduce(0, +)
        let now = Self.nanoseconds()
        guard now - lastDraw >= 100_000_000 else { return }
        lastDraw = now
        let text = total > 0 ? "\(label) \(min(100, done * 100 / total))% (\(Format.bytes(done)) of \(Format.bytes(total)))" : "\(label) \(Format.bytes(done))"
        StandardError.write("\r\u{1B}[K" + text)
        drawn = true
    }

    /// Says what is happening now (a phase without a measure).
    func phase(_ text: String) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        StandardError.write("\r\u{1B}[K\(label): \(text)")
        drawn = true
    }

    /// Clears the line.
    func finish() {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        guard drawn else { return }
        StandardError.write("\r\u{1B}[K")
        drawn = false
    }

    private static func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// Writes to standard error without buffering (progress lines, error messages).
enum StandardError {
    /// A warning or note: a line of its own.
    static func line(_ text: String) { write(text + "\n") }

    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                systemWrite(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written <= 0 { return }
            offset += written
        }
    }
}

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Musl)
private let systemWrite = Musl.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#endif
