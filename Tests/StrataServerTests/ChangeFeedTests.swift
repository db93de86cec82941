import Foundation
import Strata
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// Long polls wake for changes another process made to a shared storage, as the storage
/// announces them (`ZoneStorage.changesByOthers()`): the wake-up path of several server instances
/// on one database, here with a storage whose announcements the test makes.
@Suite("Wake-ups for changes by other processes")
struct ChangeFeedTests {
    @Test("a change another process announces wakes this server's long poll on that zone (woken, not timed out), and only that zone's")
    func announcedChangeWakesLongPoll() async throws {
        let directory = TemporaryDirectory()
        let base = try EmbeddedZoneStorage(directory: directory.path)
        let (others, announce) = AsyncStream<ZoneID>.makeStream()
        let storage = RetiringStorage(base: base, retiredBefore: 0, others: others)
        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
        let following = Task { await app.followChangesByOthers() }

        let notes = app.notifier.register(zone: "alice/notes")
        let other = app.notifier.register(zone: "alice/other")
        defer { app.notifier.remove(other) }
        announce.yield(ZoneID(owner: "alice", name: "notes"))
        // An hour: only the announcement can end this wait in a test run.
        #expect(await app.notifier.wait(notes, timeout: .seconds(3600)) == .notified)
        #expect(await app.notifier.wait(other, timeout: .milliseconds(1)) == .timedOut, "another zone's long poll woke")

        // The embedded storage is one process's: it announces nothing, and following it ends.
        announce.finish()
        await following.value
        var announced = 0
        for await _ in base.changesByOthers() { announced += 1 }
        #expect(announced == 0, "the embedded storage announced a change")
        try await base.close()
    }
}
