import Foundation
import Logging
import StrataPostgres
import StrataServer
import StrataCore

/// One key of `strata serve`'s configuration: its name in the file (dotted: `limits.maxBodyBytes`),
/// its environment variable (`STRATA_LIMITS_MAX_BODY_BYTES`), its flag, how a value is parsed and
/// applied, and how the resolved value prints.
struct ServeSetting: Sendable {
    let key: String
    let flag: String
    let secret: Bool
    let apply: @Sendable (inout ServeConfiguration, String) throws(ValueError) -> Void
    let current: @Sendable (ServeConfiguration) -> String

    /// `STRATA_` and the key in upper snake case: `limits.rateLimit.burst` → `STRATA_LIMITS_RATE_LIMIT_BURST`.
    var environmentName: String {
        var name = "STRATA_"
        for character in key {
            if character == "." {
                name += "_"
            } else if character.isUppercase {
                name += "_" + String(character)
            } else {
                name += character.uppercased()
            }
        }
        return name
    }
}

extension ServeConfiguration {
    /// Every key. A limit's flag is `--limit NAME=VALUE` (NAME without `limits.`); durations are in
    /// seconds (fractions allowed); sizes in bytes.
    static let settings: [ServeSetting] = [
        text("data", flag: "--data", \.data),
        // The URL prints with its password masked; a password may also come from
        // STRATA_POSTGRES_PASSWORD, so that it appears neither on a command line nor in a file.
        ServeSetting(key: "postgres", flag: "--postgres", secret: false, apply: { c, v throws(ValueError) in
            do {
                c.postgres = try PostgresConnectionURL(parsing: v)
            } catch {
                throw ValueError("is not a PostgreSQL URL: \((error as? ZoneStorageError)?.message ?? "\(error)")")
            }
        }, current: { $0.postgres.map { "\($0)" } ?? "none" }),
        ServeSetting(key: "postgresMaxConnections", flag: "--postgres-max-connections", secret: false,
                     apply: { c, v throws(ValueError) in c.postgresMaxConnections = try integer(v, 2...1000) },
                     current: { "\($0.postgresMaxConnections)" }),
        text("users", flag: "--users", \.users),
        text("host", flag: "--host", \.host),
        ServeSetting(key: "port", flag: "--port", secret: false, apply: { c, v throws(ValueError) in c.port = try integer(v, 0...65535) },
                     current: { "\($0.port)" }),
        ServeSetting(key: "retain", flag: "--retain", secret: false,
                     apply: { c, v throws(ValueError) in c.retain = UInt64(try integer(v, 1...Int.max)) },
                     current: { $0.retain.map { "\($0)" } ?? "everything" }),
        ServeSetting(key: "compactEvery", flag: "--compact-every", secret: false,
                     apply: { c, v throws(ValueError) in c.compactEvery = try integer(v, 1...Int(Int32.max)) },
                     current: { "\($0.compactEvery)" }),
        // A year at most: a longer grace or interval is a typo (and would overflow nothing, but
        // keep assets no one can reach for good).
        ServeSetting(key: "assetGrace", flag: "--asset-grace", secret: false,
                     apply: { c, v throws(ValueError) in c.assetGrace = try integer(v, 0...31_536_000) },
                     current: { "\($0.assetGrace)" }),
        ServeSetting(key: "assetSweepEvery", flag: "--asset-sweep-every", secret: false,
                     apply: { c, v throws(ValueError) in c.assetSweepEvery = try integer(v, 0...31_536_000) },
                     current: { $0.assetSweepEvery == 0 ? "never" : "\($0.assetSweepEvery)" }),
        ServeSetting(key: "logFormat", flag: "--log-format", secret: false, apply: { c, v throws(ValueError) in
            guard let format = LogFormat(rawValue: v) else { throw ValueError("is not a log format (text, json)") }
            c.logFormat = format
        }, current: { $0.logFormat.rawValue }),
        ServeSetting(key: "logLevel", flag: "--log-level", secret: false, apply: { c, v throws(ValueError) in
            guard let level = Logger.Level(rawValue: v) else {
                throw ValueError("is not a log level (\(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            c.logLevel = level
        }, current: { $0.logLevel.rawValue }),
        text("tls.cert", flag: "--tls-cert", \.tlsCert),
        text("tls.key", flag: "--tls-key", \.tlsKey),
        // Each a JSON file describing one issuer of bearer JWTs (see the JWTSignIn article).
        ServeSetting(key: "jwt.issuers", flag: "--jwt-issuer", secret: false, apply: { c, v throws(ValueError) in
            c.jwtIssuerFiles = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            c.jwtIssuers = []
            for path in c.jwtIssuerFiles {
                do {
                    c.jwtIssuers.append(try JWTIssuer.load(from: path))
                } catch {
                    throw ValueError("cannot be used: \((error as? JWTConfigurationError)?.message ?? "\(error)")")
                }
            }
        }, current: { $0.jwtIssuerFiles.isEmpty ? "none" : $0.jwtIssuerFiles.joined(separator: ",") }),
        // Users of the users file who may open the dashboard at /dashboard (see the operator's guide).
        ServeSetting(key: "operators", flag: "--operator", secret: false, apply: { c, v throws(ValueError) in
            c.operators = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard c.operators.allSatisfy(UsersFile.isValidName) else { throw ValueError("names a user that is not a valid user name") }
        }, current: { $0.operators.isEmpty ? "none" : $0.operators.joined(separator: ",") }),
        // The webhook that wakes devices (see the Operating article's Wake-ups).
        text("webhook.url", flag: "--webhook-url", \.webhookURL),
        text("webhook.secretFile", flag: "--webhook-secret-file", \.webhookSecretFile),
        ServeSetting(key: "webhook.coalesce", flag: "--webhook-coalesce", secret: false, apply: { c, v throws(ValueError) in
            c.webhookCoalesce = try seconds(v, positive: true)
        }, current: { c in "\(Double(c.webhookCoalesce.components.seconds) + Double(c.webhookCoalesce.components.attoseconds) / 1e18)s" }),

        limitBytes("maxBodyBytes", \.maxBodyBytes),
        limitBytes("maxStateBytes", \.maxStateBytes),
        limitCount("defaultPullLimit", \.defaultPullLimit, minimum: 1),
        limitCount("maxPullLimit", \.maxPullLimit, minimum: 1),
        limitBytes("maxPullBytes", \.maxPullBytes),
        limitDuration("maxWait", \.maxWait),
        limitDuration("maxStreamDuration", \.maxStreamDuration, positive: true),
        limitDuration("streamHeartbeat", \.streamHeartbeat, positive: true),
        limitRate("rateLimit.requestsPerSecond", \.rateLimit.requestsPerSecond),
        limitRate("rateLimit.burst", \.rateLimit.burst),
        limitDuration("maxClockOffset", \.maxClockOffset),
        limitDuration("idleTimeout", \.idleTimeout, positive: true),
        limitDuration("shedIdleAfter", \.shedIdleAfter, positive: false),
        limitDuration("headerTimeout", \.headerTimeout, positive: true),
        limitDuration("bodyTimeout", \.bodyTimeout, positive: true),
        limitDuration("writeTimeout", \.writeTimeout, positive: true),
        limitCount("maxConnections", \.maxConnections, minimum: 1),
        limitCount("maxConnectionsPerAddress", \.maxConnectionsPerAddress, minimum: 1),
        limitBytes("uploadMemoryBudget", \.uploadMemoryBudget),
        limitDuration("uploadBudgetWait", \.uploadBudgetWait),
        limitRate("failedAuthLimit.requestsPerSecond", \.failedAuthLimit.requestsPerSecond),
        limitRate("failedAuthLimit.burst", \.failedAuthLimit.burst),
        limitRate("stateUploadLimit.requestsPerSecond", \.stateUploadLimit.requestsPerSecond),
        limitRate("stateUploadLimit.burst", \.stateUploadLimit.burst),
        ServeSetting(key: "limits.trustedProxies", flag: "--limit trustedProxies=", secret: false, apply: { c, v throws(ValueError) in
            c.limits.trustedProxies = v.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }, current: { $0.limits.trustedProxies.isEmpty ? "none" : $0.limits.trustedProxies.joined(separator: ",") }),
        limitCount("maxZonesPerUser", \.maxZonesPerUser, minimum: 0),
        limitCount("maxGrantsPerZone", \.maxGrantsPerZone, minimum: 0),
        ServeSetting(key: "limits.maxStoredBytesPerUser", flag: "--limit maxStoredBytesPerUser=", secret: false,
                     apply: { c, v throws(ValueError) in c.limits.maxStoredBytesPerUser = Int64(try integer(v, 0...Int.max)) },
                     current: { "\($0.limits.maxStoredBytesPerUser)" }),
        ServeSetting(key: "limits.maxAssetBytes", flag: "--limit maxAssetBytes=", secret: false,
                     apply: { c, v throws(ValueError) in c.limits.maxAssetBytes = UInt64(try integer(v, 0...Int.max)) },
                     current: { "\($0.limits.maxAssetBytes)" }),
        limitCount("maxUnfinishedUploadsPerUser", \.maxUnfinishedUploadsPerUser, minimum: 0),
        limitCount("maxUnfinishedUploadsPerZone", \.maxUnfinishedUploadsPerZone, minimum: 0),
    ]

    /// The names `--limit NAME=VALUE` takes.
    static var limitNames: [String] {
        settings.map(\.key).filter { $0.hasPrefix("limits.") }.map { String($0.dropFirst("limits.".count)) }
    }

    // MARK: Kinds of values

    private static func text(_ key: String, flag: String, _ path: any WritableKeyPath<ServeConfiguration, String> & Sendable) -> ServeSetting {
        ServeSetting(key: key, flag: flag, secret: false, apply: { c, v throws(ValueError) in
            guard !v.isEmpty else { throw ValueError("is empty") }
            c[keyPath: path] = v
        }, current: { $0[keyPath: path] })
    }

    private static func text(_ key: String, flag: String, _ path: any WritableKeyPath<ServeConfiguration, String?> & Sendable) -> ServeSetting {
        ServeSetting(key: key, flag: flag, secret: false, apply: { c, v throws(ValueError) in
            guard !v.isEmpty else { throw ValueError("is empty") }
            c[keyPath: path] = v
        }, current: { $0[keyPath: path] ?? "none" })
    }

    private static func limitBytes(_ name: String, _ path: any WritableKeyPath<ServerConfiguration.Limits, Int> & Sendable) -> ServeSetting {
        limitCount(name, path, minimum: 1)
    }

    private static func limitCount(_ name: String, _ path: any WritableKeyPath<ServerConfiguration.Limits, Int> & Sendable,
                                   minimum: Int) -> ServeSetting {
        ServeSetting(key: "limits." + name, flag: "--limit \(name)=", secret: false, apply: { c, v throws(ValueError) in
            c.limits[keyPath: path] = try integer(v, minimum...Int.max)
        }, current: { "\($0.limits[keyPath: path])" })
    }

    private static func limitDuration(_ name: String, _ path: any WritableKeyPath<ServerConfiguration.Limits, Duration> & Sendable,
                                      positive: Bool = false) -> ServeSetting {
        ServeSetting(key: "limits." + name, flag: "--limit \(name)=", secret: false, apply: { c, v throws(ValueError) in
            c.limits[keyPath: path] = try seconds(v, positive: positive)
        }, current: { c in
            let duration = c.limits[keyPath: path]
            return "\(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)s"
        })
    }

    private static func limitRate(_ name: String, _ path: any WritableKeyPath<ServerConfiguration.Limits, Double> & Sendable) -> ServeSetting {
        ServeSetting(key: "limits." + name, flag: "--limit \(name)=", secret: false, apply: { c, v throws(ValueError) in
            if v == "unlimited" {
                c.limits[keyPath: path] = .infinity
                return
            }
            guard let value = Double(v), value.isFinite, value > 0 else { throw ValueError("is not a positive number (or \"unlimited\")") }
            c.limits[keyPath: path] = value
        }, current: { c in
            let value = c.limits[keyPath: path]
            return value.isInfinite ? "unlimited" : "\(value)"
        })
    }

    // MARK: Parsing

    static func integer(_ text: String, _ range: ClosedRange<Int>) throws(ValueError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else { throw ValueError("is not a whole number") }
        guard range.contains(value) else {
            throw ValueError(range.upperBound == Int.max ? "must be at least \(range.lowerBound)" : "must be \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    /// Seconds, fractions allowed, at most a day — a timeout or wait longer than that is a typo.
    static func seconds(_ text: String, positive: Bool) throws(ValueError) -> Duration {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw ValueError("is not a number of seconds")
        }
        guard positive ? value > 0 : value >= 0 else { throw ValueError(positive ? "must be more than 0 seconds" : "must not be negative") }
        guard value <= 86_400 else { throw ValueError("is more than a day (86400 seconds)") }
        return .nanoseconds(Int64((value * 1e9).rounded()))
    }
}
