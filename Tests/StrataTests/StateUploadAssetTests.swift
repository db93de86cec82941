import Foundation
import Testing
@_spi(StrataInternals) @testable import Strata
import StrataCore

/// An uploaded state's deleted objects bring no asset into the zone: the server does not check
/// their assets, so it must not take them.
@Suite("Uploaded states and the assets of deleted objects")
struct StateUploadAssetTests {
    @Test("a state whose record of a live note is 'deleted' before the zone's own insert, with an asset field stamped later, neither needs the asset held nor puts it on the note: the merged note, alive by the zone's insert, does not name it")
    func deletedRecordSmugglesNoAsset() throws {
        let owner = ReplicaID(rawValue: 1), grantee = ReplicaID(rawValue: 2)
        let note = ObjectID(rawValue: 42)
        let base: UInt64 = 1_700_000_000_000
        let secret = try Asset(sha256: AssetHash.of(Array("the owner's private photo".utf8)), byteCount: 25, mediaType: "image/jpeg")
        // The zone: the owner's note, inserted at base + 10, without a photo.
        let zone = ProjectionBuilder()
        try zone.apply(encoded: TransactionRecord(replica: owner, events: [
            Event(id: EventID(replica: owner, sequence: 1), hlc: HLC(milliseconds: base + 10, counter: 0),
                  change: .insert(entity: "Note", object: note, fields: ["title": .string("shopping")])),
        ]).encoded())
        // The grantee's crafted state: the same note inserted at base, deleted at base + 1 (both
        // older than the zone's insert), and a photo naming the owner's private asset at base + 20.
        let crafted = ProjectionBuilder()
        try crafted.apply(encoded: TransactionRecord(replica: grantee, events: [
            Event(id: EventID(replica: grantee, sequence: 1), hlc: HLC(milliseconds: base, counter: 0),
                  change: .insert(entity: "Note", object: note, fields: ["title": .string("x")])),
            Event(id: EventID(replica: grantee, sequence: 2), hlc: HLC(milliseconds: base + 1, counter: 0),
                  change: .delete(entity: "Note", object: note)),
            Event(id: EventID(replica: grantee, sequence: 3), hlc: HLC(milliseconds: base + 20, counter: 0),
                  change: .update(entity: "Note", object: note, fields: ["photo": .asset(secret)])),
        ]).encoded())
        let upload = try StateUpload(payload: crafted.snapshotPayload())
        #expect(upload.namedAssets.isEmpty, "a deleted object's assets are not checked")
        let merged = try zone.mergedPayload(with: upload, believingApplied: [:], crediting: 7)
        let payload = try #require(merged.payload, "the merge brought nothing: the test needs it to merge")
        let result = try ProjectionBuilder(snapshot: payload)
        #expect(result.projection.exists(note), "the zone's newer insert keeps the note alive")
        let named = try ProjectionCodec.assetsNamed(inSnapshot: payload)
        #expect(!named.contains(secret.sha256), "the merged zone names an asset it never checked")
    }
}
