extension Projection {
    /// Existing objects of `entity` whose visible field `key` references `target`.
    package func relatedClaimants(of target: ObjectID, entity: String, key: String) -> [ObjectID] {
        guard let keyID = nameID(key) else { return [] }
        var candidates = referrers[target] ?? []
        if batchOpen { for source in batchObjectIDs { candidates.insert(Referrer(source: source, key: keyID)) } }
        return candidates.filter { referrer in
            referrer.key == keyID && existing(referrer.source).map { entityName(of: $0) == entity && visibleValue($0, key: keyID)?.value == .reference(target) } == true
        }.map(\.source)
    }
}
