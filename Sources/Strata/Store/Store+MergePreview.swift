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
    public func previewMerge(with other: Store) throws -> MergePreview {
        let mine = try core.withLock { try ProjectionBuilder.copy(of: $0.projection) }
        let theirs = try other.core.withLock { try ProjectionBuilder.copy(of: $0.projection) }
        return try mine.previewMerge(with: theirs)
    }
}
