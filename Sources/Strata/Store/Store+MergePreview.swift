import Synchronization
public import StrataCore

extension Store {
    /// What merging this store with `other` would produce, and why, without writing either (see
    /// `MergePreview`): the state both would hold once they have synced with each other, and for
    /// each object they see differently, which side each field comes from and the rule that
    /// decided. This store is side A.
    ///
    /// Each store's state is copied under its own lock, one after the other; commits made in
    /// between are in one copy or the other as they land.
    ///
    /// - Throws: `StoreError` `invalidArgument` when the preview would not be what a sync gives:
    ///   either store syncs with a download mask (masked devices do not converge to one state),
    ///   or both author under one replica (a copied store: a sync forks one of them).
    public func previewMerge(with other: Store) throws -> MergePreview {
        for store in [self, other] where !(try store.downloadMask).isEmpty {
            throw StoreError(.invalidArgument, "\(store.directory) syncs with a download mask (\(try store.downloadMask)): masked devices do not converge to one state, so a merge preview would not be what syncing gives")
        }
        let shared = identity.ownReplicas.intersection(other.identity.ownReplicas)
        if !shared.isEmpty, other !== self {
            throw StoreError(.invalidArgument, "both stores author under replica \(shared.sorted()[0]) (a copied store): a sync forks one of them, which a merge preview does not show; compare them with `strata diff`")
        }
        let mine = try core.withLock { try ProjectionBuilder.copy(of: $0.projection) }
        let theirs = try other.core.withLock { try ProjectionBuilder.copy(of: $0.projection) }
        return try mine.previewMerge(with: theirs)
    }
}
