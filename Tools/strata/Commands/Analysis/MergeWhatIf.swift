import Foundation
import Strata
import StrataCore

/// `strata merge A B --what-if`: the state merging two stores would produce (what both hold once
/// they have synced with each other), and for every object they see differently, which side
/// each field comes from and the rule that decided it. Neither store is written.
struct MergeWhatIf: Codable, Sendable {
    struct Side: Codable, Sendable {
        var store: String
        var replica: String
        var user: String?
        var objects: Int
        var digest: String
        /// Objects whose visible state the merge would change on this side.
        var objectsChanged: Int
    }

    /// The event behind a value: replica and sequence, its clock and the time it stands for.
    struct EventRef: Codable, Sendable, Hashable {
        var replica: String
        var user: String?
        var sequence: UInt64
        var hlc: UInt64
        var time: String
    }

    struct Existence: Codable, Sendable {
        var inA: Bool
        var inB: Bool
        var merged: Bool
        var from: String
        var rule: String
        var why: String
        var decidedBy: EventRef?
    }

    struct Field: Codable, Sendable {
        var field: String
        var a: JSONValue?
        var b: JSONValue?
        var merged: JSONValue?
        var from: String
        var rule: String
        var why: String
        var eventA: EventRef?
        var eventB: EventRef?
    }

    struct Member: Codable, Sendable {
        var relationship: String
        var target: String
        var inA: Bool
        var inB: Bool
        var merged: Bool
        var from: String
        var rule: String
        var why: String
    }

    struct Object: Codable, Sendable {
        var object: String
        var entity: String
        var existence: Existence?
        var fields: [Field]
        var members: [Member]
    }

    var a: Side
    var b: Side
    /// The merged state: its object count and digest (what both stores' digests would be).
    var mergedObjects: Int
    var mergedDigest: String
    /// Fields of the differing objects the merged state takes from A, from B.
    var fieldsFromA: Int
    var fieldsFromB: Int
    var objectsDiffering: Int
    var objects: [Object]
    /// More objects differ than are listed (`--limit`).
    var truncated: Bool
    /// Events both stores hold under one ID with different content (a copied store written on
    /// both sides): a real sync forks one copy, which the preview does not model.
    var conflictingEvents: Int
    var warnings: [String]

    static func run(_ pathA: String, _ pathB: String, limit: Int, progress: Progress?) throws -> MergeWhatIf {
        let files = try StoreFiles.pair(pathA, pathB)
        let ((sideA, digestsA), (sideB, digestsB)) = try LoadedStore.loadPair(files[0], files[1], progress: progress)
        let conflicting = try DigestBisection.compare(digestsA, with: digestsB, limit: 1000)
        let preview: MergePreview
        do {
            preview = try sideA.projection.previewMerge(with: sideB.projection)
        } catch let error as StoreError {
            throw CLIError("the two stores cannot be merged: \(error.message)", exitCode: ExitStatus.finding)
        }
        let authors = Authors(ofStoreAt: files[0].directory).merged(with: Authors(ofStoreAt: files[1].directory))
        var warnings = [sideA, sideB].compactMap { side in side.report.readWarning.map { "\(side.files.name): \($0)" } } + authors.warnings
        for side in files {
            if let mask = try? DiffCommand.recordedMask(side.directory) {
                warnings.append("\(side.name) syncs with the download mask \(mask): masked devices do not converge to one state; the preview shows the state without masks")
            }
        }
        if files[0].replicaID == files[1].replicaID {
            warnings.append("both stores author under replica \(files[0].replicaID) (a copied store): a sync forks one of them; the preview keeps A's version of events both hold")
        }
        if !conflicting.differing.isEmpty {
            warnings.append("the stores hold \(conflicting.differing.count)\(conflicting.truncated ? "+" : "") events under the same IDs with different content (a copied store written on both sides; `strata diff` lists them): a real sync forks one copy and keeps both versions, which this preview does not show")
        }
        func ref(_ provenance: FieldProvenance?) -> EventRef? {
            provenance.map {
                EventRef(replica: $0.event.replica.description, user: authors.user($0.event.replica), sequence: $0.event.sequence,
                         hlc: $0.hlc.rawValue, time: Format.time($0.hlc))
            }
        }
        var changedA = 0
        var changedB = 0
        let objects = preview.objects.map { outcome -> Object in
            var object = Object(object: outcome.object.description, entity: outcome.entity, existence: nil, fields: [], members: [])
            var changesA = false
            var changesB = false
            if let existence = outcome.existence {
                object.existence = Existence(inA: existence.a, inB: existence.b, merged: existence.merged, from: existence.from.rawValue.uppercased(),
                                             rule: existence.reason.rawValue, why: Self.why(existence.reason, from: existence.from),
                                             decidedBy: ref(existence.decidedBy))
                changesA = changesA || existence.a != existence.merged
                changesB = changesB || existence.b != existence.merged
            }
            object.fields = outcome.fields.map { field in
                changesA = changesA || field.a != field.merged
                changesB = changesB || field.b != field.merged
                return Field(field: field.name, a: field.a.map(JSONValue.init), b: field.b.map(JSONValue.init), merged: field.merged.map(JSONValue.init),
                             from: field.from.rawValue.uppercased(), rule: field.reason.rawValue, why: Self.why(field.reason, from: field.from),
                             eventA: ref(field.eventA), eventB: ref(field.eventB))
            }
            object.members = outcome.members.map { member in
                changesA = changesA || member.a != member.merged
                changesB = changesB || member.b != member.merged
                return Member(relationship: member.relationship, target: member.target.description, inA: member.a, inB: member.b, merged: member.merged,
                              from: member.from.rawValue.uppercased(), rule: member.reason.rawValue, why: Self.why(member.reason, from: member.from))
            }
            if changesA { changedA += 1 }
            if changesB { changedB += 1 }
            return object
        }
        let from = preview.fieldsFrom
        func side(_ loaded: LoadedStore, changed: Int) -> Side {
            Side(store: loaded.files.name, replica: loaded.files.replicaID.description, user: authors.user(loaded.files.replicaID),
                 objects: loaded.projection.allObjectIDs().count, digest: loaded.projection.digest(), objectsChanged: changed)
        }
        return MergeWhatIf(a: side(sideA, changed: changedA), b: side(sideB, changed: changedB),
                           mergedObjects: preview.merged.allObjectIDs().count, mergedDigest: preview.merged.digest(),
                           fieldsFromA: from[.a, default: 0], fieldsFromB: from[.b, default: 0], objectsDiffering: objects.count,
                           objects: Array(objects.prefix(limit)), truncated: objects.count > limit,
                           conflictingEvents: conflicting.differing.count, warnings: warnings)
    }

    /// The rule in words, for the side it favoured.
    static func why(_ reason: MergePreview.Reason, from side: MergePreview.Side) -> String {
        let winner = side == .a ? "A's" : side == .b ? "B's" : "the"
        switch reason {
        case .onlyOneSideWrote: return "only \(side == .a ? "A" : side == .b ? "B" : "one side") has a write of it"
        case .notWritten: return "no event wrote it (a default, a derived inverse, or an attribute only one schema has)"
        case .targetDeleted: return "the object it points to is deleted in the merge"
        case .laterWrite: return "last writer wins: \(winner) write has the later clock"
        case .clockTieBrokenByReplica: return "both writes have the same clock: the higher replica ID wins (\(winner))"
        case .clockTieBrokenBySequence: return "same clock and replica: the higher sequence wins (\(winner))"
        case .sameWrite: return "both hold the same write; it reads differently on the two sides (what it refers to exists on one side only)"
        case .insertNewerThanDelete: return "its newest insert is newer than its newest delete: it exists"
        case .deleteNewerThanInsert: return "its newest delete is newer than its newest insert: it is gone"
        case .onlyOneSideHasObject: return "only \(side == .a ? "A" : side == .b ? "B" : "one side") has ever seen the object"
        case .addWinsOverConcurrentRemove: return "add wins: \(winner) add was not seen by the other side's removal"
        case .removalCoversEveryAdd: return "a removal names every add of it"
        case .hiddenByNewerInsert: return "a newer insert of the object (a re-creation) leaves out writes made before it"
        case .referenceToDeletedObject: return "the deciding write refers to an object the merge deletes: it reads as null"
        }
    }
}

extension MergeWhatIf {
    /// The report for a terminal.
    var text: String {
        var lines: [String] = []
        for (label, side) in [("A", a), ("B", b)] {
            lines.append("\(label)  \(side.store)  replica \(side.replica)\(Authors.by(side.user))  \(side.objects) objects  digest \(side.digest.prefix(16))")
        }
        for warning in warnings { lines.append("warning: \(warning)") }
        lines.append("")
        lines.append("what if A and B merged (nothing is written): \(mergedObjects) objects, digest \(mergedDigest.prefix(16))")
        guard objectsDiffering > 0 else {
            lines.append("nothing to merge: both read every object the same")
            return lines.joined(separator: "\n")
        }
        lines.append("\(objectsDiffering) objects differ; the merge changes \(a.objectsChanged) on A and \(b.objectsChanged) on B; fields taken from A: \(fieldsFromA), from B: \(fieldsFromB)")
        func yesNo(_ value: Bool) -> String { value ? "yes" : "no" }
        func value(_ value: JSONValue?) -> String { value.map { (try? JSONOutput.string($0, pretty: false)) ?? "?" } ?? "(absent)" }
        func event(_ ref: EventRef?) -> String { ref.map { " (\($0.replica.prefix(8))…:\($0.sequence)\(Authors.by($0.user)), \($0.time))" } ?? "" }
        for object in objects {
            lines.append("")
            lines.append("\(object.entity) \(object.object)")
            if let e = object.existence {
                lines.append("  exists: A \(yesNo(e.inA)), B \(yesNo(e.inB)) → \(yesNo(e.merged)) from \(e.from): \(e.why)\(event(e.decidedBy))")
            }
            for f in object.fields {
                lines.append("  \(f.field): A \(value(f.a))\(event(f.eventA)), B \(value(f.b))\(event(f.eventB))")
                lines.append("    → \(value(f.merged)) from \(f.from): \(f.why)")
            }
            for m in object.members {
                lines.append("  \(m.relationship) ∋ \(m.target): A \(yesNo(m.inA)), B \(yesNo(m.inB)) → \(yesNo(m.merged)) from \(m.from): \(m.why)")
            }
        }
        if truncated { lines.append("… \(objectsDiffering - objects.count) more objects (--limit)") }
        return lines.joined(separator: "\n")
    }
}
