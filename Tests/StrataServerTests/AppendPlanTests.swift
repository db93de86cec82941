import Strata
import StrataProtocol
@testable import StrataServer
import Testing
import StrataCore

/// The append plan, from values alone: every outcome a push can have, as both storages execute it.
@Suite("Append plan")
struct AppendPlanTests {
    static let zone = ZoneID(owner: "alice", name: "board")
    static let mine = ReplicaID(rawValue: 0xA11CE)
    static let others = ReplicaID(rawValue: 0xB0B)
    /// Bob's replica's transactions 1…3 (sequences 1, 2…3, 4), held at positions 0…2.
    static let held = [
        encoded(mine, 1...1, "one"), encoded(mine, 2...3, "two"), encoded(mine, 4...4, "three"),
    ]

    static func encoded(_ replica: ReplicaID, _ sequences: ClosedRange<UInt64>, _ title: String) -> PushedTransaction {
        // The events are valid by construction: a nil here would be a bug of the test.
        PushedTransaction(transaction(replica, sequences, title: title)) ?? PushedTransaction(bytes: [], firstSequence: 0, lastSequence: 0)
    }

    /// A shared zone where Bob may push and Carol may read, holding `held` of Bob's replica, with
    /// one of Alice's before them; Alice's zones store 1,000 bytes.
    static func inputs(pushing transactions: [PushedTransaction], by user: String = "bob", replica: ReplicaID = mine,
                       limit: Int64? = nil) -> AppendInputs {
        var ledger = ReplicaLedger()
        ledger.owner = "bob"
        var chain: UInt64 = HistoryChain.link(0, nil)
        for (offset, transaction) in held.enumerated() {
            ledger.hold(HeldTransaction(first: transaction.firstSequence, last: transaction.lastSequence, position: 1 + UInt64(offset), digest: transaction.digest))
            chain = HistoryChain.link(chain, transaction.digest)
        }
        let info = ZoneInfo(name: zone.name, owner: zone.owner, access: .shared, grants: ["bob": .readWrite, "carol": .read], epoch: 7)
        return AppendInputs(zone: zone, info: info, end: 4, chain: chain, user: user, replica: replica,
                            ledger: replica == mine ? ledger : ReplicaLedger(), storedBytes: 1_000, storedBytesLimit: limit,
                            transactions: transactions)
    }

    enum Expected: Sendable, CustomStringConvertible {
        case append(count: Int, end: UInt64, acknowledged: UInt64)
        case held(acknowledged: UInt64)
        case refused(ZoneStorageError.Code, expected: UInt64? = nil, sequence: UInt64? = nil)

        var description: String {
            switch self {
            case .append(let count, let end, let acknowledged): "append \(count) to end at \(end), acknowledged \(acknowledged)"
            case .held(let acknowledged): "held, acknowledged \(acknowledged)"
            case .refused(let code, _, _): "refused \(code)"
            }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var inputs: AppendInputs
        var expected: Expected
        var testDescription: String { "\(name): \(expected)" }
    }

    static let next = encoded(mine, 5...5, "four")
    static let afterNext = encoded(mine, 6...7, "five")

    static let cases: [Case] = {
        var revokedGrant = inputs(pushing: [next])
        revokedGrant.info?.grants["bob"] = .read
        var madePrivate = inputs(pushing: [next])
        madePrivate.info?.access = .private
        var deleted = inputs(pushing: [next])
        deleted.info = nil
        var recreated = inputs(pushing: [next])
        recreated.epoch = (recreated.info?.epoch ?? 0) &+ 1
        var sameLife = inputs(pushing: [next])
        sameLife.epoch = sameLife.info?.epoch
        var ownerless = inputs(pushing: [held[2], next])
        ownerless.ledger.owner = nil
        var legacy = inputs(pushing: [encoded(mine, 1...1, "other"), next])
        legacy.ledger.transactions.removeFirst()
        legacy.ledger.uncheckedThrough = 1
        // Bob removes alice's tag: naming her add at sequence 3, with the zone holding her replica through 2 or 3.
        let alices = ReplicaID(rawValue: 0xA1)
        let removal = PushedTransaction(TransactionRecord(replica: mine, events: [
            Event(id: EventID(replica: mine, sequence: 5), hlc: HLC(milliseconds: 1_700_000_000_005, counter: 0),
                  change: .remove(entity: "Note", object: ObjectID(rawValue: 1), relationship: "tags", target: ObjectID(rawValue: 2),
                                  adds: [EventID(replica: alices, sequence: 3)])),
        ])) ?? PushedTransaction(bytes: [], firstSequence: 0, lastSequence: 0)
        var removesHeldAdd = inputs(pushing: [removal])
        removesHeldAdd.heldThrough = [alices: 3]
        var removesFutureAdd = inputs(pushing: [removal])
        removesFutureAdd.heldThrough = [alices: 2]
        let removesUnknownReplica = inputs(pushing: [removal])
        return [
            Case(name: "a remove of an add the zone holds", inputs: removesHeldAdd, expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "a remove of an add past what the zone holds of its replica", inputs: removesFutureAdd, expected: .refused(.unheldAdd, sequence: 5)),
            Case(name: "a remove of an add of a replica the zone never heard of (a restored or recreated zone holds such edits only as merged state)",
                 inputs: removesUnknownReplica, expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "a new transaction", inputs: inputs(pushing: [next]), expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "two new transactions", inputs: inputs(pushing: [next, afterNext]), expected: .append(count: 2, end: 6, acknowledged: 7)),
            Case(name: "a retry with the same bytes", inputs: inputs(pushing: [held[1], held[2]]), expected: .held(acknowledged: 4)),
            Case(name: "a retry followed by new transactions", inputs: inputs(pushing: [held[2], next]), expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "a retry with other bytes (a fork)", inputs: inputs(pushing: [encoded(mine, 2...3, "copied")]),
                 expected: .refused(.replicaForked, sequence: 2)),
            Case(name: "a retry with other boundaries (a fork)", inputs: inputs(pushing: [encoded(mine, 2...2, "two")]),
                 expected: .refused(.replicaForked, sequence: 2)),
            Case(name: "a push that skips a sequence (a gap)", inputs: inputs(pushing: [afterNext]), expected: .refused(.sequenceGap, expected: 5)),
            Case(name: "a gap inside the push", inputs: inputs(pushing: [next, encoded(mine, 7...7, "x")]), expected: .refused(.sequenceGap, expected: 6)),
            Case(name: "another user's replica", inputs: inputs(pushing: [next], by: "alice"), expected: .refused(.replicaNotYours)),
            Case(name: "the owner's own new replica", inputs: inputs(pushing: [encoded(others, 1...1, "a")], by: "alice", replica: others),
                 expected: .append(count: 1, end: 5, acknowledged: 1)),
            Case(name: "past the owner's stored-bytes quota", inputs: inputs(pushing: [next], limit: 1_000 + Int64(next.bytes.count) - 1),
                 expected: .refused(.quotaExceeded)),
            Case(name: "exactly at the owner's stored-bytes quota", inputs: inputs(pushing: [next], limit: 1_000 + Int64(next.bytes.count)),
                 expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "a retry past the quota (it adds nothing)", inputs: inputs(pushing: [held[2]], limit: 1), expected: .held(acknowledged: 4)),
            Case(name: "a grant revoked (read only now)", inputs: revokedGrant, expected: .refused(.forbidden)),
            Case(name: "the zone made private", inputs: madePrivate, expected: .refused(.forbidden)),
            Case(name: "a reader", inputs: inputs(pushing: [encoded(others, 1...1, "c")], by: "carol", replica: others), expected: .refused(.forbidden)),
            Case(name: "a stranger", inputs: inputs(pushing: [encoded(others, 1...1, "m")], by: "mallory", replica: others), expected: .refused(.forbidden)),
            Case(name: "a deleted zone", inputs: deleted, expected: .refused(.zoneNotFound)),
            Case(name: "a push for the zone's previous life (deleted and created again since)", inputs: recreated, expected: .refused(.zoneReset)),
            Case(name: "a push for the zone's life as it is", inputs: sameLife, expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "an empty push", inputs: inputs(pushing: []), expected: .refused(.invalidArgument)),
            Case(name: "impossible sequences", inputs: inputs(pushing: [encoded(mine, 0...0, "zero")]), expected: .refused(.invalidArgument)),
            Case(name: "a replica held before owners were recorded", inputs: ownerless, expected: .append(count: 1, end: 5, acknowledged: 5)),
            Case(name: "history held without digests is taken as a retry", inputs: legacy, expected: .append(count: 1, end: 5, acknowledged: 5)),
        ]
    }()

    @Test("every outcome of a push: new, retry, fork, gap, foreign replica, quota, revoked access, deleted zone", arguments: cases)
    func outcome(_ test: Case) {
        let plan = AppendPlan.decide(test.inputs)
        switch (test.expected, plan) {
        case (.append(let count, let end, let acknowledged), .append(let write)):
            #expect(write.entries.count == count)
            #expect(write.end == end && write.outcome.position == end)
            #expect(write.outcome.acknowledged == acknowledged && write.ledger.acknowledged == acknowledged)
            #expect(write.outcome.appended == count && write.outcome.epoch == 7)
            #expect(write.ledger.owner == test.inputs.user)
            #expect(write.recordsOwner == (test.inputs.ledger.owner == nil))
            #expect(write.adding == write.entries.reduce(0) { $0 + Int64($1.transaction.bytes.count) })
            // Positions from the zone's end on, each with the chain after it; the pushed order kept.
            var chain = test.inputs.chain
            for (offset, entry) in write.entries.enumerated() {
                chain = HistoryChain.link(chain, entry.transaction.digest)
                #expect(entry.position == test.inputs.end + UInt64(offset) && entry.chain == chain)
                #expect(write.ledger.held(atPosition: entry.position)?.digest == entry.transaction.digest)
            }
            #expect(write.chain == chain && write.outcome.fingerprint == chain)
            #expect(write.entries.last?.transaction == test.inputs.transactions.last)
        case (.held(let acknowledged), .held(let held)):
            #expect(held.outcome == AppendOutcome(epoch: 7, position: 4, acknowledged: acknowledged, appended: 0, fingerprint: test.inputs.chain))
            #expect(held.ledger.owner == test.inputs.user && !held.recordsOwner)
        case (.refused(let code, let expected, let sequence), .refused(let error)):
            #expect(error.code == code, "\(error)")
            #expect(error.zone == Self.zone.description)
            if let expected { #expect(error.expected == expected) }
            if let sequence { #expect(error.sequence == sequence) }
        default:
            Issue.record("expected \(test.expected), planned \(plan)")
        }
    }

    @Test("a retry of a replica that had no owner records the pusher as its owner")
    func retryRecordsOwner() throws {
        var inputs = Self.inputs(pushing: [Self.held[0]])
        inputs.ledger.owner = nil
        guard case .held(let held) = AppendPlan.decide(inputs) else { throw PlanFailure("not held: \(AppendPlan.decide(inputs))") }
        #expect(held.recordsOwner && held.ledger.owner == "bob")
    }

    @Test("a plan made from a stale basis is noticed: the basis differs when the zone's end, chain, access, grants, the replica's ledger or (under a quota) the owner's bytes moved, and the plan made again from the current inputs decides the push anew")
    func staleBasis() throws {
        let planned = Self.inputs(pushing: [Self.next], limit: 1_000_000)
        guard case .append = AppendPlan.decide(planned) else { throw PlanFailure("the basis's plan does not append") }
        let basis = try #require(planned.basis)

        // The same push landed meanwhile (through another instance): now a retry.
        var landed = planned
        landed.ledger.hold(HeldTransaction(first: 5, last: 5, position: 4, digest: Self.next.digest))
        landed.chain = HistoryChain.link(planned.chain, Self.next.digest)
        landed.end = 5
        #expect(landed.basis != basis)
        guard case .held(let held) = AppendPlan.decide(landed) else { throw PlanFailure("not held: \(AppendPlan.decide(landed))") }
        #expect(held.outcome.position == 5 && held.outcome.acknowledged == 5)

        // The grant revoked meanwhile: refused.
        var revoked = planned
        revoked.info?.grants["bob"] = .read
        #expect(revoked.basis != basis)
        guard case .refused(let error) = AppendPlan.decide(revoked) else { throw PlanFailure("not refused: \(AppendPlan.decide(revoked))") }
        #expect(error.code == .forbidden)

        // The zone made public: same pushers, yet another basis (access is compared as stored).
        var opened = planned
        opened.info?.access = .public
        #expect(opened.basis != basis)

        // Another zone of the owner grew: under a quota that matters, without one it does not.
        var grown = planned
        grown.storedBytes += 10
        #expect(grown.basis != basis)
        var unlimited = planned
        unlimited.storedBytesLimit = nil
        var unlimitedGrown = unlimited
        unlimitedGrown.storedBytes += 10
        #expect(unlimited.basis == unlimitedGrown.basis)

        // Another replica's push moved the end and the chain: the plan's positions are taken.
        var moved = planned
        moved.end += 1
        moved.chain = HistoryChain.link(planned.chain, nil)
        #expect(moved.basis != basis)
        guard case .append(let write) = AppendPlan.decide(moved) else { throw PlanFailure("not an append") }
        #expect(write.entries.first?.position == 5)

        // A deleted zone has no basis; the plan refuses it.
        var deleted = planned
        deleted.info = nil
        #expect(deleted.basis == nil)
    }
}

struct PlanFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
