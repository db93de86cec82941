import Foundation
import Strata
@testable import StrataCommands
import StrataServer
import StrataTestSupport
import Testing

/// `strata diff STORE --server URL --zone NAME`: the built executable against a log server on a
/// real port, comparing a store with a zone by digests.
@Suite("strata diff --server: a store against a zone, by digests")
struct RemoteDiffCommandTests: NoteStoreCLI {
    @Test("a synced store equals its zone; an unpushed edit is only on the device; a wrong call is refused by name")
    func storeAgainstZone() async throws {
        let dir = TemporaryDirectory()
        try await withLogServer(dir.sub("server"), users: try UserDirectory(tokens: ["alice": "alice-secret"])) { url, storage in
            let phone = try await makeStore(dir, "phone")
            try await insert(phone, ["milk", "eggs"])
            let synced = try await strata(["sync", phone, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret"])
            #expect(synced.status == 0, "\(synced.stderr)")
            let diff = ["diff", phone, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret"]

            let equal = try await strata(diff)
            #expect(equal.status == 0, "\(equal.stdout)\(equal.stderr)")
            #expect(equal.stdout.contains("equal: the same events with the same content, and every object the same"), "\(equal.stdout)")
            // The schema event and the two inserts (one transaction), compared in two round trips.
            #expect(equal.stdout.contains("compared by digests: 3 (2 round trips"), "\(equal.stdout)")

            try await insert(phone, ["bread"])
            let ahead = try await strata(diff + ["--json"])
            #expect(ahead.status == 1, "\(ahead.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(ahead.stdout.utf8)) as? [String: Any])
            #expect(object["equal"] as? Bool == false)
            let replicas = try #require(object["replicas"] as? [[String: Any]])
            #expect(replicas.count == 1)
            #expect((replicas.first?["onlyOnDeviceCount"] as? NSNumber)?.intValue == 1, "the one unpushed insert")
            #expect((replicas.first?["onlyInZoneCount"] as? NSNumber)?.intValue == 0)
            #expect((object["differing"] as? [Any])?.isEmpty == true)
            // The objects: the unpushed note exists only on the device, and is listed with why.
            let state = try #require(object["state"] as? [String: Any], "no state comparison: \(ahead.stdout)")
            #expect((state["onlyOnDevice"] as? [String])?.count == 1 && (state["differing"] as? [String])?.isEmpty == true)
            let ahead2 = try await strata(diff)
            #expect(ahead2.stdout.contains("exist only on the device (created here, or deleted in the zone): 1"), "\(ahead2.stdout)")
            #expect(ahead2.stdout.contains("[only on the device]") && ahead2.stdout.contains("expected while the histories differ"), "\(ahead2.stdout)")

            // Pushed, then the zone compacted: what the zone holds only in its snapshot is held
            // all the same (nothing "only on the device"), and nothing is left to compare.
            #expect(try await strata(["sync", phone, "--server", url.absoluteString, "--zone", "notes", "--token", "alice-secret"]).status == 0)
            _ = try await storage.compact(zone: ZoneID(owner: "alice", name: "notes"), retaining: 0)
            let compacted = try await strata(diff)
            #expect(compacted.status == 0, "\(compacted.stdout)\(compacted.stderr)")
            #expect(compacted.stdout.contains("compared by digests: 0 "), "\(compacted.stdout)")

            // Refusals, before anything is sent.
            let twoStores = try await strata(["diff", phone, phone, "--server", url.absoluteString, "--zone", "notes"])
            #expect(twoStores.status == 2 && twoStores.stderr.contains("give one store with --server"))
            let noZone = try await strata(["diff", phone, "--server", url.absoluteString])
            #expect(noZone.status == 2 && noZone.stderr.contains("--server needs --zone"))
            // (This one by the server.)
            let stranger = try await strata(diff.dropLast(2) + ["--token", "not-a-token"])
            #expect(stranger.status == 2 && stranger.stderr.contains("unauthorized"), "\(stranger.stderr)")
        }
    }
}
