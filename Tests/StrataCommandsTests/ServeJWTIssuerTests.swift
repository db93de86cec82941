import ArgumentParser
import Foundation
@testable import StrataCommands
import StrataServer
import StrataTestSupport
import Testing

/// `strata serve --jwt-issuer FILE` (repeatable), `STRATA_JWT_ISSUERS` and `"jwt": {"issuers": [...]}`:
/// each names an issuer file, read and checked when the configuration is resolved.
@Suite("strata serve: JWT issuers")
struct ServeJWTIssuerTests {
    static let apple = #"{"issuer": "https://appleid.apple.com", "audiences": ["com.example.notes"], "jwksURL": "https://appleid.apple.com/auth/keys", "algorithms": ["RS256"], "userPrefix": "apple"}"#
    static let acme = #"{"issuer": "https://login.acme.example", "audiences": ["notes"], "jwksFile": "/etc/strata/acme-keys.json", "algorithms": ["ES256", "RS256"], "userPrefix": "acme", "leewaySeconds": 30}"#

    func write(_ directory: TemporaryDirectory, _ name: String, _ text: String) throws -> String {
        let path = directory.sub(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("repeated --jwt-issuer flags and the config file's jwt.issuers list each give the issuers they name, with defaults for userClaim and leeway")
    func issuersFromFlagsAndFile() throws {
        let directory = TemporaryDirectory()
        let apple = try write(directory, "apple.json", Self.apple)
        let acme = try write(directory, "acme.json", Self.acme)
        let command = try ServeCommand.parse(["--data", "d", "--jwt-issuer", apple, "--jwt-issuer", acme])
        let fromFlags = try ServeConfiguration.resolve(flags: try command.flagValues(), environment: [:], configFile: nil).serveOptions
        #expect(fromFlags.jwtIssuers.map(\.userPrefix) == ["apple", "acme"])
        #expect(fromFlags.jwtIssuers.first?.userClaim == "sub" && fromFlags.jwtIssuers.first?.leewaySeconds == 60)
        #expect(fromFlags.jwtIssuers.last?.leewaySeconds == 30)
        let config = try write(directory, "server.json", #"{"data": "d", "jwt": {"issuers": ["\#(acme)"]}}"#)
        let fromFile = try ServeConfiguration.resolve(flags: [:], environment: [:], configFile: config).serveOptions
        #expect(fromFile.jwtIssuers.map(\.issuer) == ["https://login.acme.example"])
        let none = try ServeConfiguration.resolve(flags: ["data": "d"], environment: [:], configFile: nil).serveOptions
        #expect(none.jwtIssuers.isEmpty)
    }

    @Test("an issuer file that cannot be used is refused naming the key, the file and why: HS256, a leeway over 5 minutes, plain HTTP keys, an unknown field")
    func badIssuerFiles() throws {
        let directory = TemporaryDirectory()
        for (name, text, why) in [
            ("hs.json", Self.apple.replacingOccurrences(of: "RS256", with: "HS256"), "only ES256 and RS256"),
            ("leeway.json", Self.acme.replacingOccurrences(of: "30", with: "301"), "leewaySeconds must be 0…300"),
            ("http.json", Self.apple.replacingOccurrences(of: "https://appleid.apple.com/auth", with: "http://appleid.apple.com/auth"), "must be https"),
            ("typo.json", Self.apple.replacingOccurrences(of: "audiences", with: "audience"), "unknown key \"audience\""),
        ] {
            let path = try write(directory, name, text)
            do {
                _ = try ServeConfiguration.resolve(flags: ["data": "d", "jwt.issuers": path], environment: [:], configFile: nil)
                Issue.record("\(name) was accepted")
            } catch {
                #expect(error.description.hasPrefix("jwt.issuers from flag --jwt-issuer"), "\(name): \(error)")
                #expect(error.description.contains(path) && error.description.contains(why), "\(name): \(error)")
            }
        }
    }
}
