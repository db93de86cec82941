public import Foundation

/// A fresh directory on the real file system (not tmpfs: the log's fsyncs must mean something),
/// removed when the value goes away.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = #function) {
        let safe = label.filter { $0.isLetter || $0.isNumber }.prefix(40)
        path = FileManager.default.temporaryDirectory.path + "/strata-tests/\(safe)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func sub(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
