import Foundation
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// An embedded storage whose open fails part way releases the zone logs it had opened before it
/// throws, so that the operator who fixes the cause can open it again at once.
@Suite("Embedded storage: a failed open releases what it opened")
struct EmbeddedOpenFailureTests {
    @Test("an open that fails on a missing zone log has released the logs opened before it: the storage opens again at once once the log is back")
    func failedOpenReleasesLogs() async throws {
        let directory = TemporaryDirectory()
        let data = directory.sub("data")
        let storage = try EmbeddedZoneStorage(directory: data)
        _ = try await storage.createZone(name: "a-first", owner: "alice", access: .private, grants: [:])
        let last = try await storage.createZone(name: "z-last", owner: "alice", access: .private, grants: [:])
        try await storage.close()

        let log = EmbeddedZoneStorage.logDirectory(in: data, for: last)
        let aside = directory.sub("aside")
        try FileManager.default.moveItem(atPath: log, toPath: aside)
        #expect(throws: ZoneStorageError.self) { _ = try EmbeddedZoneStorage(directory: data) }
        try FileManager.default.moveItem(atPath: aside, toPath: log)
        // No wait: every log the failed open held is released when it throws.
        let reopened = try EmbeddedZoneStorage(directory: data)
        #expect(try await reopened.zones().map(\.name) == ["a-first", "z-last"])
        try await reopened.close()
    }
}
