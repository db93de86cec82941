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
    /// The highest sequence its removes name of each other replica's adds (a remove names the
    /// adds it cancels by (replica, sequence)): what a server checks against what the zone holds,
    /// so that a remove cannot name adds that do not exist yet.
    package var namedAdds: [ReplicaID: UInt64]
    /// The first remove that names an add of its own replica at or after its own sequence (an add
    /// that cannot have come before it): `(remove, add)` sequences; `nil` when there is none.
    package var namesLaterOwnAdd: (remove: UInt64, add: UInt64)?
    /// The assets its fields name (the empty asset, which every store holds, left out): what a
    /// server must hold before it takes the transaction.
    package var namedAssets: Set<AssetHash>
    /// The sequence of its first withheld event (one a server left out of a pull for a download
    /// mask), if it has one: a device never pushes such a transaction, a server never takes it.
    package var firstWithheld: UInt64?

    /// - Throws: ``StoreError/Code/corruptEvent`` saying what is wrong and at which byte.
    package init(validating bytes: [UInt8], position: UInt64? = nil) throws {
        let raw = try EventCodec.decodeRaw(bytes, position: position)
        replica = raw.replica
        sequences = raw.events.isEmpty ? nil : raw.firstSequence...(raw.firstSequence + UInt64(raw.events.count) - 1)
        newestHLC = HLC(rawValue: raw.events.reduce(0) { max($0, $1.hlc) })
        var named: [ReplicaID: UInt64] = [:]
        var later: (remove: UInt64, add: UInt64)?
        for (index, event) in raw.events.enumerated() where event.kind == .remove {
            let sequence = raw.firstSequence + UInt64(index)
            for add in raw.adds[Int(event.start)..<Int(event.start + event.count)] {
                // Index 0 is the authoring replica (the decoder checked every index).
                if add.replica == 0 || raw.replicas[Int(add.replica)] == raw.replica {
                    if add.sequence >= sequence, later == nil { later = (sequence, add.sequence) }
                } else {
                    let replica = raw.replicas[Int(add.replica)]
                    named[replica] = max(named[replica] ?? 0, add.sequence)
                }
            }
        }
        namedAdds = named
        namesLaterOwnAdd = later
        var assets = Set<AssetHash>()
        for field in raw.fields {
            if case .asset(let asset) = field.value, asset.sha256 != Asset.empty.sha256 { assets.insert(asset.sha256) }
        }
        namedAssets = assets
        firstWithheld = raw.events.firstIndex { $0.kind == .withheld }.map { raw.firstSequence + UInt64($0) }
    }

    package static func == (a: TransactionSummary, b: TransactionSummary) -> Bool {
        a.replica == b.replica && a.sequences == b.sequences && a.newestHLC == b.newestHLC && a.namedAdds == b.namedAdds && a.namedAssets == b.namedAssets
            && a.namesLaterOwnAdd?.remove == b.namesLaterOwnAdd?.remove && a.namesLaterOwnAdd?.add == b.namesLaterOwnAdd?.add
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(replica)
        hasher.combine(sequences)
        hasher.combine(newestHLC)
    }
}
