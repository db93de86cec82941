import Foundation
import StrataTestSupport

/// The repository's Fixtures folder, found from this file.
enum FixturePaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").path
    static let deviceA = root + "/divergent/device-a"
    static let deviceB = root + "/divergent/device-b"

    /// A copy of a fixture store to change (tests never touch the committed files).
    static func copy(_ path: String, to directory: TemporaryDirectory, as name: String) throws -> String {
        let target = directory.sub(name)
        try FileManager.default.copyItem(atPath: path, toPath: target)
        return target
    }
}
