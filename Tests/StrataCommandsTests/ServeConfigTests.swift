import Foundation
@testable import StrataCommands
import StrataPostgres
import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// `strata serve`'s configuration: flags > STRATA_* environment > config file > defaults.
@Suite("strata serve configuration: precedence, every limit, bad values")
struct ServeConfigTests {
    func file(_ json: String, _ directory: TemporaryDirectory) throws -> String {
        let path = directory.sub("config.json")
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("A flag beats the environment, which beats the file, which beats the default")
    func precedence() throws {
        let directory = TemporaryDirectory(#function)
        let path = try file(#"{"data": "/from/file", "port": 7001, "host": "10.0.0.1", "users": "file-users.json", "limits": {"maxBodyBytes": 1000, "maxWait": 2.5, "trustedProxies": ["10.0.0.2"]}}"#, directory)
        let resolved = try ServeConfiguration.resolve(
            flags: ["port": "7003"],
            environment: ["STRATA_PORT": "7002", "STRATA_HOST": "10.0.0.9", "STRATA_LIMITS_MAX_BODY_BYTES": "2000", "STRATA_TOKEN": "not ours"],
            configFile: path)
        #expect(resolved.port == 7003)
        #expect(resolved.host == "10.0.0.9")
        #expect(resolved.data == "/from/file" && resolved.users == "file-users.json")
        #expect(resolved.limits.maxBodyBytes == 2000)
        #expect(resolved.limits.maxWait == .milliseconds(2500))
        #expect(resolved.limits.trustedProxies == ["10.0.0.2"])
        #expect(resolved.limits.maxPullLimit == ServerConfiguration.Limits().maxPullLimit)
        let sources = Dictionary(uniqueKeysWithValues: resolved.effective.map { ($0.key, $0.source) })
        #expect(sources["port"] == .flag("--port"))
        #expect(sources["host"] == .environment("STRATA_HOST"))
        #expect(sources["data"] == .file(path))
        #expect(sources["limits.maxPullLimit"] == .defaultValue)
    }

    @Test("A webhook needs a URL and a secret file of at least 16 bytes; each missing or bad part is refused naming it")
    func webhookSettings() throws {
        let directory = TemporaryDirectory(#function)
        let secret = directory.sub("secret")
        try Data("  a-secret-of-enough-bytes\n".utf8).write(to: URL(fileURLWithPath: secret))
        let short = directory.sub("short")
        try Data("too-short".utf8).write(to: URL(fileURLWithPath: short))
        let resolved = try ServeConfiguration.resolve(flags: ["data": "d", "webhook.url": "https://backend.example/strata", "webhook.secretFile": secret],
                                                      environment: ["STRATA_WEBHOOK_COALESCE": "2.5"], configFile: nil)
        let webhook = try #require(resolved.serveOptions.configuration.webhook)
        #expect(webhook.url.absoluteString == "https://backend.example/strata")
        #expect(webhook.secret == Array("a-secret-of-enough-bytes".utf8), "surrounding whitespace is not part of the secret")
        #expect(webhook.coalesce == .milliseconds(2500))
        #expect(try ServeConfiguration.resolve(flags: ["data": "d"], environment: [:], configFile: nil).serveOptions.configuration.webhook == nil)
        let refusals: [([String: String], String)] = [
            (["webhook.url": "https://backend.example/strata"], "only webhook.url is set"),
            (["webhook.secretFile": secret], "only webhook.secretFile is set"),
            (["webhook.url": "ftp://backend.example", "webhook.secretFile": secret], "is not an http(s) URL"),
            (["webhook.url": "https://backend.example", "webhook.secretFile": short], "the webhook secret has 9 bytes; it needs at least 16"),
            (["webhook.url": "https://backend.example", "webhook.secretFile": directory.sub("absent")], "cannot be read"),
        ]
        for (flags, message) in refusals {
            #expect {
                _ = try ServeConfiguration.resolve(flags: ["data": "d"].merging(flags) { $1 }, environment: [:], configFile: nil)
            } throws: { error in
                "\(error)".contains(message)
            }
        }
    }

    @Test("STRATA_CONFIG names the file when --config does not")
    func configFromEnvironment() throws {
        let directory = TemporaryDirectory(#function)
        let path = try file(#"{"data": "/d", "logFormat": "json", "logLevel": "debug"}"#, directory)
        let resolved = try ServeConfiguration.resolve(flags: [:], environment: ["STRATA_CONFIG": path], configFile: nil)
        #expect(resolved.logFormat == .json && "\(resolved.logLevel)" == "debug" && resolved.data == "/d")
    }

    @Test("A bad value is refused naming the key and its source")
    func badValues() throws {
        let directory = TemporaryDirectory(#function)
        func problem(_ flags: [String: String], _ environment: [String: String], _ path: String? = nil) -> String {
            do {
                _ = try ServeConfiguration.resolve(flags: ["data": "/d"].merging(flags) { $1 }, environment: environment, configFile: path)
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(problem([:], ["STRATA_LIMITS_MAX_BODY_BYTES": "lots"])
            == #"limits.maxBodyBytes from environment variable STRATA_LIMITS_MAX_BODY_BYTES: "lots" is not a whole number"#)
        #expect(problem(["port": "70000"], [:]) == #"port from flag --port: "70000" must be 0…65535"#)
        #expect(problem(["logLevel": "loud"], [:]).hasPrefix(#"logLevel from flag --log-level: "loud" is not a log level"#))
        let typo = try file(#"{"limits": {"maxBodyByte": 5}}"#, directory)
        #expect(problem([:], [:], typo) == "config file \(typo): unknown key \"limits.maxBodyByte\" (the keys are listed in the Operating guide)")
        let negative = try file(#"{"limits": {"idleTimeout": -1}}"#, directory)
        #expect(problem([:], [:], negative) == "limits.idleTimeout from config file \(negative): \"-1\" must be more than 0 seconds")
        #expect(problem(["tls.cert": "c.pem"], [:]).contains("TLS needs both tls.cert and tls.key"))
        #expect(problem([:], [:], directory.sub("missing.json")).hasPrefix("cannot read the config file"))
    }

    @Test("Every field of ServerConfiguration.Limits has a configuration key")
    func everyLimitConfigurable() {
        let keys = Set(ServeConfiguration.settings.map(\.key))
        for child in Mirror(reflecting: ServerConfiguration.Limits()).children {
            guard let name = child.label else { continue }
            let covered = keys.contains("limits." + name) || keys.contains { $0.hasPrefix("limits.\(name).") }
            #expect(covered, "limits.\(name) has no configuration key")
        }
    }

    @Test("Assets are swept hourly with a day's grace by default, with or without --retain; --asset-sweep-every 0 never sweeps; a grace past a year is refused")
    func assetSweepSchedule() throws {
        let defaults = try ServeConfiguration.resolve(flags: ["data": "d"], environment: [:], configFile: nil).serveOptions
        #expect(defaults.retention == nil)
        #expect(defaults.assetSweep == AssetSweepSchedule(grace: .seconds(86_400), interval: .seconds(3_600)))
        let chosen = try ServeConfiguration.resolve(flags: ["data": "d", "assetGrace": "600", "retain": "100"], environment: ["STRATA_ASSET_SWEEP_EVERY": "60"],
                                                    configFile: nil).serveOptions
        #expect(chosen.assetSweep == AssetSweepSchedule(grace: .seconds(600), interval: .seconds(60)) && chosen.retention != nil)
        let never = try ServeConfiguration.resolve(flags: ["data": "d", "assetSweepEvery": "0"], environment: [:], configFile: nil).serveOptions
        #expect(never.assetSweep == nil)
        #expect(throws: ServeConfiguration.Problem.self) {
            try ServeConfiguration.resolve(flags: ["data": "d", "assetGrace": "31536001"], environment: [:], configFile: nil)
        }
    }

    @Test("The environment variable of a key is STRATA_ and the key in upper snake case")
    func environmentNames() {
        let names = Dictionary(uniqueKeysWithValues: ServeConfiguration.settings.map { ($0.key, $0.environmentName) })
        #expect(names["limits.rateLimit.requestsPerSecond"] == "STRATA_LIMITS_RATE_LIMIT_REQUESTS_PER_SECOND")
        #expect(names["tls.cert"] == "STRATA_TLS_CERT")
        #expect(names["compactEvery"] == "STRATA_COMPACT_EVERY")
    }

    @Test("PostgreSQL instead of a data directory: from a flag, STRATA_POSTGRES or the file; its password from STRATA_POSTGRES_PASSWORD, masked when printed; exactly one storage")
    func postgresStorage() throws {
        let resolved = try ServeConfiguration.resolve(
            flags: [:], environment: ["STRATA_POSTGRES": "postgres://strata@db.internal/zones", "STRATA_POSTGRES_PASSWORD": "hunter2"], configFile: nil)
        #expect(resolved.data == nil && resolved.postgres?.host == "db.internal" && resolved.postgres?.password == "hunter2")
        let printed = resolved.effectiveMetadata.description
        #expect(printed.contains("db.internal") && !printed.contains("hunter2"), "\(printed)")
        let inline = try ServeConfiguration.resolve(flags: ["postgres": "postgres://strata:s3cret@db/zones", "postgresMaxConnections": "5"],
                                                    environment: [:], configFile: nil)
        #expect(inline.postgres?.password == "s3cret" && inline.postgresMaxConnections == 5)
        #expect(!inline.effectiveMetadata.description.contains("s3cret"))
        func problem(_ flags: [String: String]) -> String {
            do {
                _ = try ServeConfiguration.resolve(flags: flags, environment: [:], configFile: nil)
                return ""
            } catch {
                return error.description
            }
        }
        #expect(problem(["data": "/d", "postgres": "postgres://a@b/c"]).contains("both a data directory and a PostgreSQL URL"))
        #expect(problem([:]).contains("no storage"))
        #expect(problem(["postgres": "mysql://a@b/c"]).contains("postgres from flag --postgres"))
        #expect(problem(["postgres": "postgres://a@b/c", "postgresMaxConnections": "1"]).contains("postgresMaxConnections"))
    }
}
