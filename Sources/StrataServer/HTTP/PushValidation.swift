import StrataProtocol
public import StrataCore

/// The checks of a push body that need no storage: every frame a transaction of one replica with
/// events, and no event stamped further ahead of the server's clock than it accepts. The HTTP
/// endpoint and in-process transports (simulations) share them, so both refuse the same pushes
/// with the same errors.
public enum PushValidation {
    /// The most replicas a push's removes may name adds of: each is looked up (under the zone's
    /// lock on PostgreSQL), and a device's own push names the few whose tags it removes.
    public static let maxNamedReplicas = 1_024

    /// The replica and the transactions of a push, or the error to answer.
    ///
    /// - Parameters:
    ///   - frames: the push body's frames (encoded transactions).
    ///   - now: the server's time in milliseconds since 1970.
    ///   - maxClockOffset: how far ahead of `now` an event's timestamp may be.
    /// - Throws: ``ServerError`` — `badRequest` for a malformed push, `clockSkew` (with the
    ///   server's time and the offset) for an event stamped too far ahead.
    public static func validate(_ frames: [[UInt8]], now: UInt64, maxClockOffset: Duration) throws(ServerError) -> (replica: ReplicaID, transactions: [PushedTransaction]) {
        guard !frames.isEmpty else { throw ServerError(.badRequest, "the push body holds no transaction") }
        let maxOffset = UInt64(max(0, maxClockOffset / .milliseconds(1)))
        var replica: ReplicaID?
        var transactions: [PushedTransaction] = []
        transactions.reserveCapacity(frames.count)
        var namedReplicas = Set<ReplicaID>()
        for (index, bytes) in frames.enumerated() {
            // Checked without building events: a push of 100,000 inserts costs one pass over its bytes.
            let record: TransactionSummary
            do {
                record = try TransactionSummary(validating: bytes)
            } catch {
                throw ServerError(.badRequest, "frame \(index) is not a transaction: \(error)")
            }
            guard let sequences = record.sequences else {
                throw ServerError(.badRequest, "frame \(index) is a transaction without events")
            }
            if let withheld = record.firstWithheld {
                throw ServerError(.badRequest, "frame \(index) (replica \(record.replica)): the event at sequence \(withheld) is a withheld placeholder, which only a server writes into a masked pull; a push holds the events themselves")
            }
            if let replica, replica != record.replica {
                throw ServerError(.badRequest, "frame \(index) is of replica \(record.replica) but frame 0 of \(replica): a push holds the transactions of one replica")
            }
            if Projection.isCredited(record.replica) {
                throw ServerError(.badRequest, "frame \(index): replica \(record.replica) is of the range the server credits merged states to (its upper 64 bits all ones); a device never has such an ID")
            }
            replica = record.replica
            let newest = record.newestHLC
            if newest.milliseconds > now &+ maxOffset {
                throw ServerError(
                    .clockSkew,
                    "frame \(index) (replica \(record.replica), sequences \(sequences.lowerBound)...\(sequences.upperBound)) holds an event stamped \(newest.milliseconds) ms since 1970, \(newest.milliseconds &- now) ms ahead of the server's clock (\(now)); at most \(maxOffset) ms are accepted — check the device's clock",
                    sequence: sequences.lowerBound, serverTime: now, maxOffset: maxOffset)
            }
            namedReplicas.formUnion(record.namedAdds.keys)
            guard namedReplicas.count <= maxNamedReplicas else {
                throw ServerError(.badRequest, "the push's removes name adds of more than \(maxNamedReplicas) replicas; push them in smaller batches")
            }
            if let later = record.namesLaterOwnAdd {
                throw ServerError(.badRequest, "frame \(index) (replica \(record.replica)): the remove at sequence \(later.remove) names the replica's own add at sequence \(later.add), which does not come before it; a remove names only adds that exist")
            }
            transactions.append(PushedTransaction(bytes: bytes, firstSequence: sequences.lowerBound, lastSequence: sequences.upperBound,
                                                  namedAdds: record.namedAdds, namedAssets: record.namedAssets))
        }
        guard let replica else { throw ServerError(.badRequest, "the push body holds no transaction") }
        return (replica, transactions)
    }
}
