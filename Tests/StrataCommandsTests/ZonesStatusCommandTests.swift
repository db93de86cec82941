import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataTestSupport
import Testing

/// `strata zones status`: the devices syncing with a user's zones, as the device registry holds
/// them, through the built executable against a real server.
extension DatabaseCommandsTests {
    @Test("zones status: each zone a database synced lists its device; a device holding events the zone never had is shown divergent, first, with the diff to run; another user sees nothing of it")
    func zonesStatus() async throws {
        let dir = TemporaryDirectory()
        try await withServer(dir.sub("server")) { url in
            let server = url.absoluteString
            let alice = dir.sub("alice")
            try await makeDatabase(alice, [ZoneReference("default"): ["private"], ZoneReference("groceries"): ["milk", "eggs"]])
            let synced = try await run("sync", alice, "--server", server, "--token", "alice-secret", "--json")
            #expect(synced.status == 0, "\(synced.stderr)")

            let all = try array(try await run("zones", "status", "--server", server, "--token", "alice-secret", "--json").stdout)
            #expect(Set(all.compactMap { $0["zone"] as? String }) == ["default", "groceries"], "\(all)")
            for zone in all {
                let devices = try #require(zone["devices"] as? [[String: Any]])
                #expect(devices.count == 1 && devices.first?["check"] as? String == "consistent" && zone["divergent"] as? Int == 0, "\(zone)")
                #expect(devices.first?["position"] as? Int == zone["end"] as? Int, "a device that just synced is not behind")
            }

            // Another device of alice's wrote a note the zone never got; this one took it by
            // another way than the zone, and syncs.
            let other = try await Store.open(at: dir.sub("other"), schema: try Schema.fromJSON(Data(Self.schema.utf8)))
            try await other.transaction { tx in _ = try tx.insert("Note", ["title": .string("bread")]) }
            let foreign = try other.transactions().filter { $0.transaction.replica == other.replicaID }.map(\.transaction)
            try await other.close()
            let database = try await Database.open(at: alice, schema: try Schema.fromJSON(Data(Self.schema.utf8)))
            try await #require(database.store(for: ZoneReference("groceries"))).applyRemote(foreign)
            try await database.close()
            let again = try await run("sync", alice, "--zone", "groceries", "--server", server, "--token", "alice-secret", "--json")
            #expect(again.status == 0, "\(again.stderr)")

            let text = try await run("zones", "status", "groceries", "--server", server, "--token", "alice-secret")
            #expect(text.status == 0, "\(text.stderr)")
            let lines = text.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first?.contains("1 devices, 1 divergent") == true, "\(text.stdout)")
            #expect(lines.count > 3 && lines[2].contains(" divergent ") && lines.contains { $0.contains(" divergent ") } && lines.contains { $0.contains("strata diff STORE --server URL --zone groceries --token-file F") }, "\(text.stdout)")
            let summary = try await run("zones", "status", "--server", server, "--token", "alice-secret")
            #expect(summary.stdout.contains("groceries  end") && summary.stdout.contains("1 divergent"), "\(summary.stdout)")

            // Bob owns nothing here; alice's zone's devices are not his to see.
            let bobs = try await run("zones", "status", "--server", server, "--token", "bob-secret")
            #expect(bobs.status == 0 && bobs.stdout.contains("no zones"), "\(bobs.stdout) \(bobs.stderr)")
            let refused = try await run("zones", "status", "alice/groceries", "--server", server, "--token", "bob-secret")
            #expect(refused.status == 2 && refused.stderr.contains("reading the devices of zone alice/groceries"), "\(refused.stderr)")
        }
    }
}
