import Foundation
import Testing
@testable import StrataServer

@Suite("Change notifier timeouts")
struct ChangeNotifierTests {
    @Test("a thousand waits time out together from one ticker, none before its timeout; a notify ends a wait before it, and cancelling one ends it as cancelled")
    func sharedTicker() async throws {
        let notifier = ChangeNotifier()
        let start = ContinuousClock.now
        let wakes = await withTaskGroup(of: (ChangeNotifier.Wake, Duration).self) { group in
            for i in 0..<1_000 {
                group.addTask {
                    let waiter = notifier.register(zone: "z\(i % 10)")
                    defer { notifier.remove(waiter) }
                    let wake = await notifier.wait(waiter, timeout: .milliseconds(200))
                    return (wake, ContinuousClock.now - start)
                }
            }
            var all: [(ChangeNotifier.Wake, Duration)] = []
            for await wake in group { all.append(wake) }
            return all
        }
        #expect(wakes.allSatisfy { $0.0 == .timedOut })
        #expect(wakes.allSatisfy { $0.1 >= .milliseconds(200) }, "a wait ended before its timeout")

        // A notify wakes the zone's waiters long before a one-minute timeout.
        let waiter = notifier.register(zone: "a")
        let other = notifier.register(zone: "b")
        async let woken = notifier.wait(waiter, timeout: .seconds(60))
        try await Task.sleep(for: .milliseconds(50))
        notifier.notify(zone: "a")
        #expect(await woken == .notified)
        notifier.remove(waiter)

        let cancelled = Task { await notifier.wait(other, timeout: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        #expect(await cancelled.value == .cancelled)
        notifier.remove(other)
        #expect(notifier.pendingTimeoutCount == 0, "a wait that ended early left its timeout behind")

        // After the ticker stopped (no deadline pending), a new wait still times out.
        try await Task.sleep(for: .milliseconds(200))
        let late = notifier.register(zone: "c")
        #expect(await notifier.wait(late, timeout: .milliseconds(100)) == .timedOut)
        notifier.remove(late)
    }

    @Test("a change wakes the database long polls of the zone's users only; a change of unknown users, and a reload, wake every database long poll")
    func databaseWaitersByUser() async throws {
        let notifier = ChangeNotifier()
        let bob = notifier.register(databaseOf: "bob")
        let carol = notifier.register(databaseOf: "carol")
        let zone = notifier.register(zone: "alice/notes")
        notifier.notify(zone: "alice/notes", users: ["alice", "bob"])
        #expect(await notifier.wait(bob, timeout: .seconds(60)) == .notified)
        #expect(await notifier.wait(zone, timeout: .seconds(60)) == .notified)
        // Carol has no part in alice/notes: her poll sleeps on to its timeout.
        #expect(await notifier.wait(carol, timeout: .milliseconds(100)) == .timedOut)
        for waiter in [bob, carol, zone] { notifier.remove(waiter) }
        #expect(notifier.databaseWaiterCount == 0)

        // Announced by another process, users unknown: every database poll wakes.
        let dave = notifier.register(databaseOf: "dave")
        #expect(notifier.databaseWaiterCount == 1)
        notifier.notify(zone: "erin/photos")
        #expect(await notifier.wait(dave, timeout: .seconds(60)) == .notified)
        notifier.remove(dave)

        // The users file reloaded: everyone looks again.
        let frank = notifier.register(databaseOf: "frank")
        notifier.notifyAll()
        #expect(await notifier.wait(frank, timeout: .seconds(60)) == .notified)
        notifier.remove(frank)
    }

    @Test("a push that read the zone before a grant landed still wakes the new grantee's database poll (the last change of the zone's users is remembered); a deleted zone's users are forgotten")
    func rememberedUsers() async throws {
        let notifier = ChangeNotifier()
        // A grant gives bob the zone: alice and bob now.
        notifier.notify(zone: "alice/notes", users: ["alice", "bob"], nowUsers: ["alice", "bob"])
        let bob = notifier.register(databaseOf: "bob")
        // A push whose request read the zone before the grant names alice only.
        notifier.notify(zone: "alice/notes", users: ["alice"])
        #expect(await notifier.wait(bob, timeout: .seconds(60)) == .notified)
        notifier.remove(bob)

        // The zone deleted: its users are forgotten, and a later zone of the same name that bob
        // has no part in does not wake him.
        notifier.notify(zone: "alice/notes", users: ["alice", "bob"], nowUsers: [])
        let again = notifier.register(databaseOf: "bob")
        notifier.notify(zone: "alice/notes", users: ["alice"])
        #expect(await notifier.wait(again, timeout: .milliseconds(100)) == .timedOut)
        notifier.remove(again)
    }
}
