import ArgumentParser
import StrataServer
import StrataCore

/// `strata users add|remove|list [--users FILE]`: the users file of `strata serve`.
///
/// `add` generates a token (256 random bits, `strata_<id>_<secret>`), prints it once on standard
/// output and stores only its salted hash; `list` prints names and the kind of credential, never a
/// secret or a hash. Every edit replaces the file atomically with mode 0600; a running server
/// picks it up on SIGHUP.
struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Add, remove or list the users of `strata serve` (its users file).",
        discussion: """
        A running `strata serve` reads the file again on SIGHUP (kill -HUP PID); a damaged file is \
        logged and the users loaded before stay.
        """,
        subcommands: [UsersAddCommand.self, UsersRemoveCommand.self, UsersListCommand.self]
    )
}

/// The users file option shared by the `users` subcommands.
struct UsersFileOption: ParsableArguments {
    @Option(help: "The users file (created by `add` when missing).")
    var users: String = "users.json"
}

struct UsersAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a user with a new random token, printed once (only its salted hash is stored)."
    )

    @Argument(help: "The user's name: 1–64 of [A-Za-z0-9._@-], starting with a letter or digit.")
    var name: String

    @OptionGroup var file: UsersFileOption

    func run() async throws {
        let token: UserToken
        do {
            token = try UsersFile.add(name, to: file.users)
        } catch {
            throw CLIError(error.message)
        }
        print(token.text)
        StandardError.line("added user \(name) to \(file.users); the token above is shown only this once (give it with --token-file or STRATA_TOKEN)")
    }
}

struct UsersRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a user (their token stops working once the server reloads the file)."
    )

    @Argument(help: "The user's name.")
    var name: String

    @OptionGroup var file: UsersFileOption

    func run() async throws {
        do {
            try UsersFile.remove(name, from: file.users)
        } catch {
            throw CLIError(error.message)
        }
        print("removed user \(name) from \(file.users)")
    }
}

struct UsersListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the users: name and kind of token (generated, or an older sha256 entry); never a secret."
    )

    @OptionGroup var file: UsersFileOption

    @OptionGroup var output: JSONFlag

    func run() async throws {
        let users: [UserDirectory.User]
        do {
            users = try UsersFile.list(file.users)
        } catch {
            throw CLIError(error.message)
        }
        if output.json {
            print(try JSONOutput.string(users.map { ["name": $0.name, "kind": $0.kind] }))
        } else {
            for user in users { print("\(user.name)\t\(user.kind)") }
        }
    }
}
