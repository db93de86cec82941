import ArgumentParser
import AsyncHTTPClient
import Foundation
import Strata
import StrataProtocol
import StrataSync
import StrataSyncAsyncHTTPClient

/// The server and the user's credentials, as `strata sync` takes them: shared by `strata zones`
/// and `strata share`.
struct ServerConnection: ParsableArguments {
    @Option(help: "The server's base URL, e.g. http://localhost:8080.")
    var server: String

    @Option(help: "The bearer token of the user. Visible to every user of the machine in `ps`: prefer --token-file or STRATA_TOKEN.")
    var token: String?

    @Option(help: "A file holding the bearer token (its first line), readable only by you (chmod 600). Without --token or --token-file, the token is read from STRATA_TOKEN.")
    var tokenFile: String?

    @Option(help: "Trust the server's certificate through this PEM file instead of the system's roots.")
    var caFile: String?

    func validate() throws {
        guard URL(string: server)?.scheme?.hasPrefix("http") == true else {
            throw ValidationError("--server must be an http(s) URL, got \(server)")
        }
    }

    /// Runs `body` with a transport to the server as the user; a failure of the server or the
    /// network becomes a ``CLIError`` (exit 2) saying what was asked (`what`) of which server.
    func with<T>(_ what: String, _ body: (HTTPSyncTransport) async throws -> T) async throws -> T {
        let credentials = try SyncToken.resolve(option: token, file: tokenFile)
        guard let url = URL(string: server) else { throw CLIError("--server must be an http(s) URL, got \(server)") }
        let client = try caFile.map(SyncCommand.client(trusting:))
        let transport = HTTPSyncTransport(server: url, bearer: credentials, client: client ?? HTTPSyncTransport.defaultClient)
        do {
            let result = try await body(transport)
            try? await client?.shutdown()
            return result
        } catch {
            try? await client?.shutdown()
            if let error = error as? CLIError { throw error }
            throw CLIError("\(what) on \(server) failed: \(error)")
        }
    }
}

/// A zone named on the command line: `NAME`, `OWNER/NAME`, or `NAME` with `--owner OWNER`.
func zoneReference(_ text: String, owner: String?) throws -> ZoneReference {
    guard let reference = ZoneTargets.reference(text) else {
        throw ValidationError("neither NAME nor OWNER/NAME (a name is 1–64 of [A-Za-z0-9._-]): \(text)")
    }
    guard let owner else { return reference }
    guard reference.owner == nil || reference.owner == owner else {
        throw ValidationError("\(text) names owner \(reference.owner ?? ""), --owner says \(owner)")
    }
    return ZoneReference(reference.name, owner: owner)
}

/// `strata zones list|show`: the user's zones on a server.
struct ZonesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zones",
        abstract: "List the zones a user has on a server (owned and shared with them), show one with its participants, change one's settings, or see the devices syncing with it.",
        subcommands: [ZonesListCommand.self, ZonesShowCommand.self, ZonesSetCommand.self, ZonesStatusCommand.self]
    )
}

/// `strata zones list --server URL [--token T] [--json]`.
struct ZonesListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List your zones: those you own and those shared with you (accepted or not).",
        discussion: """
        One line per zone: OWNER/NAME, your role (owner, read, readWrite), whether you accepted \
        the share, the zone's access (private, shared, public). --json prints an array of {name, \
        owner, role, accepted, access, token, epoch}, sorted by owner then name.
        """
    )

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func run() async throws {
        // The database changes from no token: every zone the user owns or was granted.
        let zones = try await connection.with("listing the zones") { transport in
            var zones: [DatabaseZone] = []
            var token: String?
            while true {
                let page = try await transport.databaseChanges(after: token, limit: 500, wait: nil)
                zones += page.zones
                token = page.token
                if !page.moreComing { break }
            }
            return zones.sorted { ($0.owner, $0.name) < ($1.owner, $1.name) }
        }
        if output.json {
            print(try JSONOutput.string(zones))
        } else {
            if zones.isEmpty { print("no zones") }
            for zone in zones {
                print("\(zone.owner)/\(zone.name)  role \(zone.role.rawValue)  \(zone.accepted ? "accepted" : "not accepted")  access \(zone.access.rawValue)")
            }
        }
    }
}

/// `strata zones show ZONE [--owner O] --server URL …`.
struct ZonesShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a zone: owner, access, token, and who it is shared with (grant, accepted).",
        discussion: "--json prints the server's description: {name, owner, access, grants, epoch, token, canPush, participants: [{user, grant, accepted}], …}."
    )

    @Argument(help: "The zone: NAME (yours, or with --owner), or OWNER/NAME.")
    var zone: String

    @Option(help: "The zone's owner, when it is another user's zone.")
    var owner: String?

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws { _ = try zoneReference(zone, owner: owner) }

    func run() async throws {
        let reference = try zoneReference(zone, owner: owner)
        let description = try await connection.with("describing zone \(reference)") { try await $0.describeZone(reference) }
        if output.json {
            print(try JSONOutput.string(description))
            return
        }
        print("zone \(description.owner)/\(description.name): access \(description.access.rawValue), epoch \(description.epoch), token \(description.token)")
        if let version = description.minSchemaVersion { print("syncs with app schema version \(version) and later") }
        let participants = description.participants ?? []
        if participants.isEmpty { print("shared with nobody") }
        for participant in participants.sorted(by: { $0.user < $1.user }) {
            print("  \(participant.user)  \(participant.grant.rawValue)  \(participant.accepted ? "accepted" : "not accepted")")
        }
    }
}

/// `strata zones set ZONE --min-schema-version N --server URL …`: the owner's settings of a zone.
struct ZonesSetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change a zone's settings (its owner only): the oldest app schema version it syncs with.",
        discussion: """
        --min-schema-version N: apps whose schema version is older than N are refused \
        (schemaTooOld) on every push and pull of the zone, and keep their edits until updated; 1 \
        lets every version sync again. Prints the zone as `zones show` does (--json: the server's \
        description).
        """
    )

    @Argument(help: "The zone: NAME (one of yours).")
    var zone: String

    @Option(name: .customLong("min-schema-version"), help: "The oldest app schema version the zone syncs with (1 to 1000000).")
    var minSchemaVersion: Int

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        _ = try zoneReference(zone, owner: nil)
        guard (1...1_000_000).contains(minSchemaVersion) else { throw ValidationError("--min-schema-version must be from 1 to 1000000") }
    }

    func run() async throws {
        let reference = try zoneReference(zone, owner: nil)
        let description = try await connection.with("changing zone \(reference)") { transport in
            // A PUT of a zone that does not exist creates it: a typo must not make a zone.
            _ = try await transport.describeZone(reference)
            return try await transport.updateZone(reference, settings: ZoneSettings(minSchemaVersion: minSchemaVersion))
        }
        if output.json {
            print(try JSONOutput.string(description))
        } else {
            print("zone \(description.owner)/\(description.name) syncs with app schema version \(description.minSchemaVersion ?? 1) and later")
        }
    }
}

/// `strata share grant|revoke|accept|leave`: sharing a zone with other users, and answering a share.
struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share one of your zones with a user or take it back; accept or leave a zone shared with you.",
        subcommands: [ShareGrantCommand.self, ShareRevokeCommand.self, ShareAcceptCommand.self, ShareLeaveCommand.self]
    )
}

/// What `share grant` and `share revoke` print with `--json`.
struct ParticipantsJSON: Encodable {
    var zone: String
    var participants: [ZoneParticipant]
}

func printParticipants(_ zone: ZoneReference, _ participants: [ZoneParticipant], json: Bool) throws {
    let sorted = participants.sorted { $0.user < $1.user }
    if json {
        print(try JSONOutput.string(ParticipantsJSON(zone: zone.description, participants: sorted)))
        return
    }
    print("zone \(zone) is shared with \(sorted.isEmpty ? "nobody" : "")")
    for participant in sorted {
        print("  \(participant.user)  \(participant.grant.rawValue)  \(participant.accepted ? "accepted" : "not accepted")")
    }
}

/// `strata share grant ZONE --with USER --access read|readWrite`.
struct ShareGrantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grant",
        abstract: "Share one of your zones with a user (read: they pull; readWrite: they push too). A private zone becomes shared.",
        discussion: "Prints the zone's participants; --json {zone, participants: [{user, grant, accepted}]}."
    )

    @Argument(help: "Your zone's name.")
    var zone: String

    @Option(name: .customLong("with"), help: "The user to share it with.")
    var user: String

    @Option(help: "read or readWrite.")
    var access: String = ZoneGrant.readWrite.rawValue

    var grant: ZoneGrant { ZoneGrant(rawValue: access) ?? .read }

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard ZoneReference.isValidName(zone) else { throw ValidationError("not a zone name (1–64 of [A-Za-z0-9._-]): \(zone)") }
        guard ZoneReference.isValidOwner(user) else { throw ValidationError("--with: not a user name (1–256 bytes)") }
        guard ZoneGrant(rawValue: access) != nil else { throw ValidationError("--access: read or readWrite, not \(access)") }
    }

    func run() async throws {
        let reference = ZoneReference(zone)
        let participants = try await connection.with("sharing zone \(zone) with \(user)") { transport in
            try await ZoneSharing.share(reference, with: user, access: grant, over: transport)
        }
        try printParticipants(reference, participants, json: output.json)
    }
}

/// `strata share revoke ZONE --from USER`.
struct ShareRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Take a user's grant on one of your zones away: their devices set the zone aside.",
        discussion: "Prints the zone's participants; --json {zone, participants}. Revoking a user who has no grant changes nothing (exit 0)."
    )

    @Argument(help: "Your zone's name.")
    var zone: String

    @Option(help: "The user whose grant to take away.")
    var from: String

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard ZoneReference.isValidName(zone) else { throw ValidationError("not a zone name (1–64 of [A-Za-z0-9._-]): \(zone)") }
    }

    func run() async throws {
        let reference = ZoneReference(zone)
        let participants = try await connection.with("revoking \(from)'s grant on zone \(zone)") { transport in
            try await ZoneSharing.revoke(reference, from: from, over: transport)
        }
        try printParticipants(reference, participants, json: output.json)
    }
}

/// `strata share accept ZONE --owner O`.
struct ShareAcceptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accept",
        abstract: "Accept a zone another user shares with you: the server records it, and your databases add the zone on their next sync.",
        discussion: "Prints the zone; --json the server's description of it ({name, owner, access, grants, token, participants, …})."
    )

    @Argument(help: "The zone: NAME with --owner, or OWNER/NAME.")
    var zone: String

    @Option(help: "The zone's owner.")
    var owner: String?

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard try zoneReference(zone, owner: owner).owner != nil else { throw ValidationError("name the zone's owner: --owner OWNER or OWNER/NAME") }
    }

    func run() async throws {
        let reference = try zoneReference(zone, owner: owner)
        let description = try await connection.with("accepting zone \(reference)") { try await $0.acceptShare(reference) }
        if output.json {
            print(try JSONOutput.string(description))
        } else {
            print("accepted zone \(reference): you may \(description.canPush == true ? "read and write" : "read"); your databases add it on their next sync")
        }
    }
}

/// `strata share leave ZONE --owner O`.
struct ShareLeaveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leave",
        abstract: "Leave a zone another user shares with you: the server removes your grant, and your databases set the zone aside on their next sync.",
        discussion: "--json prints {zone, left: true}."
    )

    @Argument(help: "The zone: NAME with --owner, or OWNER/NAME.")
    var zone: String

    @Option(help: "The zone's owner.")
    var owner: String?

    @OptionGroup var connection: ServerConnection
    @OptionGroup var output: JSONFlag

    func validate() throws {
        guard try zoneReference(zone, owner: owner).owner != nil else { throw ValidationError("name the zone's owner: --owner OWNER or OWNER/NAME") }
    }

    func run() async throws {
        let reference = try zoneReference(zone, owner: owner)
        try await connection.with("leaving zone \(reference)") { try await $0.leaveShare(reference) }
        if output.json {
            struct Left: Encodable {
                var zone: String
                var left = true
            }
            print(try JSONOutput.string(Left(zone: reference.description)))
        } else {
            print("left zone \(reference)")
        }
    }
}
