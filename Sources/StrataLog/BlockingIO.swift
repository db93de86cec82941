import Dispatch

/// Runs blocking file work (reading a log, replaying it, fsyncs the caller waits for) on threads
/// of its own rather than on Swift's cooperative pool, which has one thread per core: a task that
/// blocks there for a read holds back every other task of the process (a server's other
/// requests, an app's UI work) for as long. The caller suspends until the work is done.
package enum BlockingIO {
    private static let queue = DispatchQueue(label: "strata.blocking-io", qos: .utility, attributes: .concurrent)

    /// `body`'s result, computed on a blocking-work thread.
    package static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }
}
