import Foundation

/// Where `strata sync` takes the user's bearer token from: `--token-file PATH` (the file's first
/// line), `--token TOKEN`, or the `STRATA_TOKEN` environment variable — so that a token never
/// needs to be on a command line, where `ps` shows it to every user of the machine.
enum SyncToken {
    /// The environment variable read when neither option is given.
    static let environmentVariable = "STRATA_TOKEN"

    /// The token: from `file` or `option` (not both), else from the environment.
    ///
    /// - Throws: ``CLIError`` when both options are given, none is and the environment has no
    ///   token, or the file is unreadable, empty, or readable or writable by anyone but its owner.
    static func resolve(option: String?, file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        switch (option, file) {
        case (_?, _?):
            throw CLIError("give the token once: --token or --token-file, not both")
        case (let token?, nil):
            guard !token.isEmpty else { throw CLIError("--token is empty") }
            return token
        case (nil, let path?):
            return try read(path)
        case (nil, nil):
            guard let token = environment[environmentVariable]?.trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
                throw CLIError("no token: give --token-file PATH (a file only you can read), set \(environmentVariable), or --token TOKEN (visible in ps)")
            }
            return token
        }
    }

    /// The first line of the token file, which must be its owner's alone (mode 0600 or 0400), as
    /// ssh requires of a private key: a token others can read is a token others have.
    static func read(_ path: String) throws -> String {
        let mode: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        } catch {
            throw CLIError("cannot read the token file \(path): \(error.localizedDescription)")
        }
        guard mode & 0o077 == 0 else {
            throw CLIError("the token file \(path) is accessible to others (mode \(String(mode & 0o777, radix: 8))); make it yours alone: chmod 600 \(path)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read the token file \(path)")
        }
        let token = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard !token.isEmpty else { throw CLIError("the token file \(path) is empty") }
        return token
    }
}
