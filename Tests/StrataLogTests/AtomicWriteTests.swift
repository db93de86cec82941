import Foundation
import Testing
@testable import StrataLog

@Suite("Atomic file writes", .serialized)
struct AtomicWriteTests {
    @Test("a write that meets a full disk throws the disk's error, keeps the old file whole and leaves no temporary behind; the next write succeeds")
    func fullDiskLeavesNoTemporary() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("strata-atomic-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/upload"
        try FileSystem.writeAtomically([1, 2, 3], to: path)
        FaultInjection.failWrites(under: dir, errno: ENOSPC)
        defer { FaultInjection.clear(dir) }
        #expect { try FileSystem.writeAtomically([UInt8](repeating: 9, count: 4096), to: path) } throws: { ($0 as? LogError)?.errno == ENOSPC }
        FaultInjection.clear(dir)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["upload"], "a temporary was left")
        #expect(try FileSystem.read(path) == [1, 2, 3])
        try FileSystem.writeAtomically([4], to: path)
        #expect(try FileSystem.read(path) == [4])
    }
}
