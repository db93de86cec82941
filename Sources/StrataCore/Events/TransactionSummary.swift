/// What a server checks of a pushed transaction, read from its encoding without building events
/// (no dictionary or string per field): who wrote it, its sequences and its newest stamp. Reading
/// it decodes the transaction completely, so bytes that would not decode are refused as surely
/// as by ``TransactionRecord/init(decoding:)``.
package struct TransactionSummary: Sendable, Hashable {
    package var replica: ReplicaID
    /// `nil` for a transaction without events.
    package var sequences: ClosedRange<UInt64>?
    /// The newest HLC of its events (0 without events).
    package var newestHLC: HLC

    /// - Throws: ``StoreError/Code/corruptEvent`` saying what is wrong and at which byte.
    package init(validating bytes: [UInt8], position: UInt64? = nil) throws {
        let raw = try EventCodec.decodeRaw(bytes, position: position)
        replica = raw.replica
        sequences = raw.events.isEmpty ? nil : raw.firstSequence...(raw.firstSequence + UInt64(raw.events.count) - 1)
        newestHLC = HLC(rawValue: raw.events.reduce(0) { max($0, $1.hlc) })
    }
}
