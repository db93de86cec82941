import Foundation
import Logging
import StrataPostgres
import StrataServer
import StrataCore

/// Everything `strata serve` runs with, resolved from four sources in order of precedence:
/// command-line flags, then `STRATA_*` environment variables, then the configuration file
/// (`--config FILE` or `STRATA_CONFIG`), then the defaults. Every key is listed in
/// ``ServeConfiguration/settings`` and documented in the Operating article of StrataServer.
///
/// A bad value is refused with an error naming the key and where it came from; an unknown key in
/// the file is refused too (a misspelt limit would otherwise silently keep its default).
struct ServeConfiguration: Sendable {
    var data: String?
    /// The PostgreSQL database of the zones (instead of ``data``), checked when resolved.
    var postgres: PostgresConnectionURL?
    var postgresMaxConnections = 20
    var users = "users.json"
    var host = "127.0.0.1"
    var port = 8080
    var retain: UInt64?
    var compactEvery = 600
    /// Seconds an unneeded asset is kept before the sweep removes it.
    var assetGrace = 86_400
    /// Seconds between asset sweeps (0: never).
    var assetSweepEvery = 3_600
    var logFormat = LogFormat.text
    var logLevel = Logger.Level.info
    var tlsCert: String?
    var tlsKey: String?
    var limits = ServerConfiguration.Limits()
    /// The JWT issuer files (`--jwt-issuer`, repeatable; `"jwt": {"issuers": [...]}`) and the
    /// issuers they hold, read when resolved.
    var jwtIssuerFiles: [String] = []
    var jwtIssuers: [JWTIssuer] = []
    /// The webhook (`webhook.url`, `webhook.secretFile`, `webhook.coalesce`), made when resolved.
    var webhookURL: String?
    var webhookSecretFile: String?
    var webhookCoalesce: Duration = .seconds(1)
    var webhook: WebhookConfiguration?
    /// The users who may open the operator's dashboard (`operators`, `--operator`, repeatable).
    var operators: [String] = []

    /// Where a value came from.
    enum Source: Sendable, Hashable, CustomStringConvertible {
        case flag(String)
        case environment(String)
        case file(String)
        case defaultValue

        var description: String {
            switch self {
            case .flag(let flag): "flag \(flag)"
            case .environment(let name): "environment variable \(name)"
            case .file(let path): "config file \(path)"
            case .defaultValue: "default"
            }
        }
    }

    /// A value that cannot be used: the key, its source and why.
    struct Problem: Error, CustomStringConvertible, Sendable {
        let description: String
    }

    /// Each key's value as resolved and its source, for the start-up log (secrets masked).
    private(set) var effective: [(key: String, value: String, source: Source)] = []

    /// The command-line values given (the flags' spellings as keys of ``settings``), the
    /// environment and the configuration file's path (`nil`: `STRATA_CONFIG`, else none).
    static func resolve(flags: [String: String], environment: [String: String], configFile: String?) throws(Problem) -> ServeConfiguration {
        let filePath = configFile ?? environment["STRATA_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let fileValues = try filePath.map { path throws(Problem) in try readFile(path) } ?? [:]
        var configuration = ServeConfiguration()
        for setting in settings {
            let source: Source
            let text: String
            if let value = flags[setting.key] {
                (source, text) = (.flag(setting.flag), value)
            } else if let value = environment[setting.environmentName] {
                (source, text) = (.environment(setting.environmentName), value)
            } else if let value = fileValues[setting.key], let filePath {
                (source, text) = (.file(filePath), value)
            } else {
                configuration.effective.append((setting.key, setting.secret ? "***" : setting.current(configuration), .defaultValue))
                continue
            }
            do {
                try setting.apply(&configuration, text)
            } catch {
                throw Problem(description: "\(setting.key) from \(source): \(setting.secret ? "the value" : "\"\(text)\"") \(error.reason)")
            }
            configuration.effective.append((setting.key, setting.secret ? "***" : setting.current(configuration), source))
        }
        if let filePath {
            let known = Set(settings.map(\.key))
            if let unknown = fileValues.keys.sorted().first(where: { !known.contains($0) }) {
                throw Problem(description: "config file \(filePath): unknown key \"\(unknown)\" (the keys are listed in the Operating guide)")
            }
        }
        switch (configuration.data, configuration.postgres) {
        case (nil, nil):
            throw Problem(description: "no storage: give a data directory (--data, STRATA_DATA or \"data\" in the config file) or a PostgreSQL URL (--postgres, STRATA_POSTGRES or \"postgres\")")
        case (.some, .some):
            throw Problem(description: "both a data directory and a PostgreSQL URL are set: the zones live in one of them (see `strata migrate` to copy a data directory into PostgreSQL)")
        default:
            break
        }
        if let url = configuration.postgres, url.password == nil, let password = environment["STRATA_POSTGRES_PASSWORD"] {
            configuration.postgres?.password = password
        }
        if (configuration.tlsCert == nil) != (configuration.tlsKey == nil) {
            throw Problem(description: "TLS needs both tls.cert and tls.key (--tls-cert/--tls-key, STRATA_TLS_CERT/STRATA_TLS_KEY); only \(configuration.tlsCert == nil ? "tls.key" : "tls.cert") is set")
        }
        configuration.webhook = try webhook(configuration)
        if configuration.limits.defaultPullLimit > configuration.limits.maxPullLimit {
            throw Problem(description: "limits.defaultPullLimit (\(configuration.limits.defaultPullLimit)) is larger than limits.maxPullLimit (\(configuration.limits.maxPullLimit))")
        }
        return configuration
    }

    /// The webhook the resolved keys describe: a URL and a secret file both, or neither.
    private static func webhook(_ configuration: ServeConfiguration) throws(Problem) -> WebhookConfiguration? {
        switch (configuration.webhookURL, configuration.webhookSecretFile) {
        case (nil, nil):
            return nil
        case (nil, _), (_, nil):
            throw Problem(description: "a webhook needs both webhook.url and webhook.secretFile (--webhook-url/--webhook-secret-file, STRATA_WEBHOOK_URL/STRATA_WEBHOOK_SECRET_FILE); only \(configuration.webhookURL == nil ? "webhook.secretFile" : "webhook.url") is set")
        case (let text?, let path?):
            guard let url = URL(string: text) else { throw Problem(description: "webhook.url \"\(text.prefix(200))\" is not a URL") }
            let contents: String
            do {
                contents = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw Problem(description: "webhook.secretFile \(path): cannot be read: \(error.localizedDescription)")
            }
            var webhook: WebhookConfiguration
            do {
                webhook = try WebhookConfiguration(url: url, secret: Array(contents.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
            } catch {
                throw Problem(description: "webhook: \(error.description) (secret from \(path))")
            }
            webhook.coalesce = configuration.webhookCoalesce
            return webhook
        }
    }

    /// What `StrataServerApp.serve` runs with.
    var serveOptions: ServeOptions {
        var server = ServerConfiguration(host: host, port: port, limits: limits)
        server.webhook = webhook
        server.operators = Set(operators)
        return ServeOptions(dataDirectory: data ?? "", usersFile: users,
                     configuration: server,
                     retention: retain.map { Retention(transactions: $0, interval: .seconds(compactEvery)) },
                     assetSweep: assetSweepEvery == 0 ? nil : AssetSweepSchedule(grace: .seconds(assetGrace), interval: .seconds(assetSweepEvery)),
                     tls: tlsCert.flatMap { cert in tlsKey.map { TLSFiles(certificateChain: cert, privateKey: $0) } })
            .with(jwtIssuers: jwtIssuers)
    }

    /// The effective configuration as log metadata: `key: "value (source)"`.
    var effectiveMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = [:]
        for entry in effective { metadata[entry.key] = "\(entry.value) (\(entry.source))" }
        return metadata
    }

    // MARK: The file

    /// The file's values by dotted key (`{"limits": {"maxBodyBytes": 1}}` → `limits.maxBodyBytes`),
    /// scalars as text and arrays of strings joined with commas.
    static func readFile(_ path: String) throws(Problem) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Problem(description: "cannot read the config file \(path)")
        }
        let root: [String: ConfigFileValue]
        do {
            root = try JSONDecoder().decode([String: ConfigFileValue].self, from: data)
        } catch {
            throw Problem(description: "config file \(path) is not a JSON object: \(error)")
        }
        var values: [String: String] = [:]
        func flatten(_ object: [String: ConfigFileValue], prefix: String) throws(Problem) {
            for (name, value) in object {
                let key = prefix + name
                switch value {
                case .object(let nested):
                    try flatten(nested, prefix: key + ".")
                case .list(let items):
                    values[key] = items.joined(separator: ",")
                case .text(let text):
                    values[key] = text
                case .null:
                    continue  // as if absent
                case .unsupported(let what):
                    throw Problem(description: "\(key) from config file \(path): expected a number, a string or a list of strings, got \(what)")
                }
            }
        }
        try flatten(root, prefix: "")
        return values
    }
}

/// A value of the configuration file: numbers are kept as their text, so that each key parses
/// them as it parses the same value from a flag or the environment.
enum ConfigFileValue: Decodable {
    case text(String)
    case list([String])
    case object([String: ConfigFileValue])
    case null
    case unsupported(String)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .unsupported("\(flag)")
        } else if let integer = try? container.decode(Int64.self) {
            self = .text(String(integer))
        } else if let number = try? container.decode(Double.self) {
            self = .text(String(number))
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else if let list = try? container.decode([String].self) {
            self = .list(list)
        } else if let object = try? container.decode([String: ConfigFileValue].self) {
            self = .object(object)
        } else {
            self = .unsupported("a list holding something other than strings")
        }
    }
}

/// Why a value was refused (the key and source are added by the caller).
struct ValueError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

extension ServeOptions {
    /// These options with `issuers`.
    func with(jwtIssuers issuers: [JWTIssuer]) -> ServeOptions {
        var options = self
        options.jwtIssuers = issuers
        return options
    }
}
