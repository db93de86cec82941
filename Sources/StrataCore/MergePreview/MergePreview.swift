/// What merging two states would produce, and why, without writing either: the state both would
/// hold after syncing with each other (the join of the two under the merge rule, as if every
/// event either has applied were applied to both), and for every object the two see differently
/// which side each field, existence and member of the result comes from and the rule that
/// decided it.
///
/// Built by ``ProjectionBuilder/previewMerge(with:)`` (two replayed stores; the `strata merge
/// --what-if` command) or `Store.previewMerge(with:)` (two open stores).
///
/// What it does not model:
/// - Local-only attributes never sync: they are left out of ``objects`` (each device keeps its
///   own), as the state digest leaves them out. ``merged`` holds both sides' local-only values,
///   merged as if they synced: read only synced attributes from it.
/// - Download masks: a masked device never receives what its mask leaves out, so two devices
///   with masks do not converge to one state. `Store.previewMerge(with:)` refuses masked stores.
/// - Two stores that hold *different* events under the same IDs (a store copied and both copies
///   written) are not reconciled here: a real sync forks one of the copies (its events are
///   re-authored under a new replica) and both versions survive; the preview keeps side A's
///   version. `Store.previewMerge(with:)` refuses two stores authoring under one replica, and
///   `strata diff` names such events ("in both with different content").
/// - What a server does to events on their way: a push whose clock is far ahead is restamped,
///   and a state uploaded to heal a zone is credited to a new replica (whose ID is above every
///   other, so it wins clock ties). The preview orders events as the stores hold them.
public struct MergePreview {
    /// The merged state, under the stored names of the schema (a store reads through its app's
    /// names when a migration renamed something): read its objects with
    /// ``ProjectionBuilder/object(_:)`` and ``ProjectionBuilder/provenance(_:)``, and its
    /// ``ProjectionBuilder/digest()`` (what both stores' `Store.digest()` would be).
    public let merged: ProjectionBuilder
    /// The objects whose visible state differs between the two sides, by ID.
    public internal(set) var objects: [ObjectOutcome] = []

    /// Where a part of the merged state comes from.
    public enum Side: String, Sendable, Hashable, Codable {
        case a, b
        /// Neither side reads it so (a newer insert on one side starts a new incarnation that
        /// the other side's writes are older than, and the re-creating side's value is not the
        /// merged one either).
        case neither
    }

    /// The rule of the merge that decided a part of the merged state.
    public enum Reason: String, Sendable, Hashable, Codable {
        /// Only one side has a write of the field (or an add of the member).
        case onlyOneSideWrote
        /// Last writer wins: the winning write has the later hybrid logical clock.
        case laterWrite
        /// Both writes have the same clock: the higher replica ID wins.
        case clockTieBrokenByReplica
        /// Same clock and replica: the higher sequence wins.
        case clockTieBrokenBySequence
        /// Both sides hold the same write; what it reads as differs (a reference whose target
        /// exists on one side only: the merged state has the target).
        case sameWrite
        /// No event of the object's current incarnation wrote it: a default, a derived inverse,
        /// or an attribute only one side's schema has.
        case notWritten
        /// The object's newest insert is newer than its newest delete: it exists.
        case insertNewerThanDelete
        /// The object's newest delete is newer than its newest insert: it is gone.
        case deleteNewerThanInsert
        /// Only one side has ever seen the object.
        case onlyOneSideHasObject
        /// The other side removed the member, but not this add of it, which its removal never
        /// saw: add wins over a concurrent remove.
        case addWinsOverConcurrentRemove
        /// A removal names every add of the member either side holds: it is gone.
        case removalCoversEveryAdd
        /// The member's target object is deleted in the merge.
        case targetDeleted
        /// A newer insert of the object (a re-creation) leaves out writes made before it.
        case hiddenByNewerInsert
        /// The winning write (or the write both hold) is a reference to an object the merge
        /// deletes: it reads as null.
        case referenceToDeletedObject
    }

    /// One differing object.
    public struct ObjectOutcome: Sendable, Hashable {
        public var object: ObjectID
        public var entity: String
        /// Set when the object exists on one side only.
        public var existence: ExistenceOutcome?
        /// The attributes and to-one references that read differently, by name.
        public var fields: [FieldOutcome]
        /// The to-many members present on one side only.
        public var members: [MemberOutcome]
    }

    /// Whether the object exists after the merge.
    public struct ExistenceOutcome: Sendable, Hashable {
        public var a: Bool
        public var b: Bool
        public var merged: Bool
        public var from: Side
        public var reason: Reason
        /// The insert or delete that decided it.
        public var decidedBy: FieldProvenance?
    }

    /// One field after the merge.
    public struct FieldOutcome: Sendable, Hashable {
        public var name: String
        public var a: Value?
        public var b: Value?
        public var merged: Value?
        public var from: Side
        public var reason: Reason
        /// The event that set each side's value, and the merged one's.
        public var eventA: FieldProvenance?
        public var eventB: FieldProvenance?
        public var mergedEvent: FieldProvenance?
    }

    /// One to-many member present on one side only.
    public struct MemberOutcome: Sendable, Hashable {
        public var relationship: String
        public var target: ObjectID
        public var a: Bool
        public var b: Bool
        public var merged: Bool
        public var from: Side
        public var reason: Reason
    }

    /// How many fields of the differing objects the merged state takes from each side.
    public var fieldsFrom: [Side: Int] {
        var counts: [Side: Int] = [:]
        for object in objects {
            for field in object.fields { counts[field.from, default: 0] += 1 }
        }
        return counts
    }
}
