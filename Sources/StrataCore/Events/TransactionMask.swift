import StrataLog
/// Applies a ``DownloadMask`` to what a server sends: a pulled transaction's encoding and a
/// snapshot's payload. Both backends' pull and snapshot answers go through it.
package enum TransactionMask {
    /// The name table at the head of a snapshot payload (``ProjectionCodec``); `nil` when it does
    /// not read.
    static func snapshotNames(_ payload: [UInt8]) -> [String]? {
        payload.withUnsafeBytes { raw -> [String]? in
            var r = ByteReader(raw)
            guard r.u8() != nil, let count = r.varint(), count <= UInt64(r.remaining) else { return nil }
            var names: [String] = []
            for _ in 0..<count {
                guard let bytes = r.lengthPrefixed() else { return nil }
                names.append(String(decoding: bytes, as: UTF8.self))
            }
            return names
        }
    }

    /// `bytes` (one transaction's encoding) with what `mask` withholds left out:
    /// - an event of a masked entity, a to-many add or remove of a masked relationship, and an
    ///   update that changes only masked attributes become ``Change/withheld`` (the replica, the
    ///   sequences and the HLCs stay, so nothing after them is renumbered);
    /// - an insert or update keeps its other attributes.
    ///
    /// The same bytes come back when the mask withholds nothing of them (the common case costs a
    /// look at the name table).
    ///
    /// - Throws: ``StoreError/Code/corruptEvent`` when the bytes do not decode.
    package static func apply(_ mask: DownloadMask, to bytes: [UInt8]) throws -> [UInt8] {
        guard !mask.isEmpty else { return bytes }
        let raw = try EventCodec.decodeRaw(bytes, position: nil)
        // Only entity names can mask a whole event, and only an attribute name of a masked
        // entity's attributes a value: neither in the name table, nothing to do.
        let maskedNames = Set(mask.attributes.values.joined()).union(mask.entities)
        guard raw.names.contains(where: maskedNames.contains) else { return bytes }
        var record = try EventCodec.decode(bytes, position: nil)
        var changed = false
        for index in record.events.indices {
            let masked = masked(record.events[index].change, by: mask)
            if masked != record.events[index].change {
                record.events[index].change = masked
                changed = true
            }
        }
        return changed ? EventCodec.encode(record) : bytes
    }

    /// What a device with `mask` receives of `change`.
    package static func masked(_ change: Change, by mask: DownloadMask) -> Change {
        switch change {
        case .insert(let entity, let object, let fields):
            guard !mask.withholds(entity: entity) else { return .withheld }
            return .insert(entity: entity, object: object, fields: fields.filter { !mask.withholds($0.key, of: entity) })
        case .update(let entity, let object, let fields):
            guard !mask.withholds(entity: entity) else { return .withheld }
            let kept = fields.filter { !mask.withholds($0.key, of: entity) }
            // An update of masked attributes alone says nothing the device may know.
            return kept.isEmpty && !fields.isEmpty ? .withheld : .update(entity: entity, object: object, fields: kept)
        case .delete(let entity, _):
            return mask.withholds(entity: entity) ? .withheld : change
        case .add(let entity, _, let relationship, _), .remove(let entity, _, let relationship, _, _):
            return mask.withholds(relationship, of: entity) ? .withheld : change
        case .schema, .withheld:
            return change
        }
    }

    /// A snapshot's payload (``ProjectionCodec``) with the objects of masked entities and the
    /// masked attributes and relationships of the others left out. What the snapshot says was
    /// applied stays: a device that adopts it does not pull those events again (they would be
    /// withheld anyway).
    ///
    /// - Throws: ``StoreError/Code/corruptSnapshot`` when the payload does not decode.
    package static func apply(_ mask: DownloadMask, toSnapshot payload: [UInt8]) throws -> [UInt8] {
        guard !mask.isEmpty else { return payload }
        let maskedNames = Set(mask.attributes.values.joined()).union(mask.entities)
        // The name table first (the payload's head): a mask naming nothing the zone uses costs
        // no decoding of the objects.
        if let names = snapshotNames(payload), !names.contains(where: maskedNames.contains) { return payload }
        let projection = Projection()
        try ProjectionCodec.decode(payload, into: projection)
        let names = projection.names
        guard names.contains(where: maskedNames.contains) else { return payload }
        return ProjectionCodec.encode(projection) { _, record in
            let entity = Int(record.entity) < names.count ? names[Int(record.entity)] : ""
            guard !mask.withholds(entity: entity) else { return nil }
            guard let maskedNames = mask.attributes[entity] else { return record }
            var kept = record
            kept.fields.removeAll { Int($0.key) < names.count && maskedNames.contains(names[Int($0.key)]) }
            kept.sets.removeAll { Int($0.key) < names.count && maskedNames.contains(names[Int($0.key)]) }
            return kept
        }
    }
}
