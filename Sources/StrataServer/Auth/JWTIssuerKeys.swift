import Foundation
import JWTKit
import Logging
import Synchronization

/// The public keys of one issuer, by `kid` and algorithm, read from its JWKS file or URL, and
/// read again when a token names a `kid` the server does not hold — at most once per
/// ``refreshInterval`` — so that a key the issuer adds is used without a restart and a key it
/// removes is refused from the next read on. Keys older than ``maxKeyAge`` are read again in the
/// background when a token uses them, so that a removed key stops being accepted even when no
/// token names a new one. A read that fails keeps the keys held and is logged.
final class JWTIssuerKeys: Sendable {
    /// A key usable for one algorithm.
    typealias Keys = [String: [String: any JWTAlgorithm]]

    let issuer: JWTIssuer
    /// The shortest time between two reads caused by unknown `kid`s.
    let refreshInterval: Duration
    /// How old the keys may be before a token using them has them read again (in the background).
    let maxKeyAge: Duration
    private let clock: ServerClock
    private let logger: Logger
    private let state: Mutex<State>

    private struct State: Sendable {
        var keys: Keys
        /// When (``ServerClock/elapsed``) the last read after an unknown `kid` began.
        var lastRefresh: Duration?
        /// When the last read of any kind began (the first load: when the keys were made).
        var lastRead: Duration
        /// The read under way, which every request naming an unknown `kid` meanwhile awaits.
        var refreshing: Task<Void, Never>?
        /// Reads of the JWKS since start, the first included (for tests and logs).
        var reads: Int
    }

    /// The largest JWKS read (a file or a fetch): a key set is a few KiB.
    static let maxJWKSBytes = 1 << 20
    /// The longest a JWKS fetch may take.
    static let fetchTimeout: Duration = .seconds(10)

    private init(issuer: JWTIssuer, keys: Keys, refreshInterval: Duration, maxKeyAge: Duration, clock: ServerClock, logger: Logger) {
        self.issuer = issuer
        self.refreshInterval = refreshInterval
        self.maxKeyAge = maxKeyAge
        self.clock = clock
        self.logger = logger
        state = Mutex(State(keys: keys, lastRefresh: nil, lastRead: clock.elapsed(), refreshing: nil, reads: 1))
    }

    /// The issuer's keys as read now.
    ///
    /// - Throws: ``JWTConfigurationError`` when the JWKS cannot be read or holds no usable key:
    ///   a server does not start without its issuers' keys.
    static func load(_ issuer: JWTIssuer, refreshInterval: Duration, maxKeyAge: Duration, clock: ServerClock,
                     logger: Logger) async throws(JWTConfigurationError) -> JWTIssuerKeys {
        let keys = try await read(issuer)
        logger.info("JWT issuer keys loaded", metadata: ["issuer": "\(issuer.issuer)", "kids": "\(keys.keys.sorted().joined(separator: ","))"])
        return JWTIssuerKeys(issuer: issuer, keys: keys, refreshInterval: refreshInterval, maxKeyAge: maxKeyAge, clock: clock, logger: logger)
    }

    /// The key named `kid` for `algorithm`; a token with no `kid` uses the only key of an issuer
    /// that has one.
    func key(kid: String?, algorithm: String) -> (any JWTAlgorithm)? {
        state.withLock { state in
            if let kid { return state.keys[kid]?[algorithm] }
            return state.keys.count == 1 ? state.keys.first?.value[algorithm] : nil
        }
    }

    /// Whether the issuer holds a key named `kid` (for any algorithm).
    func holds(kid: String) -> Bool { state.withLock { $0.keys[kid] != nil } }

    /// How many times the JWKS was read (the first load included).
    var reads: Int { state.withLock { $0.reads } }

    /// Reads the JWKS again after a token named a `kid` not held, unless the last such read
    /// began less than ``refreshInterval`` ago; a read under way is awaited rather than repeated.
    ///
    /// - Returns: whether the keys were read (successfully or not) for this call.
    func refreshAfterUnknownKey() async -> Bool {
        let now = clock.elapsed()
        let task: Task<Void, Never>? = state.withLock { state in
            if let running = state.refreshing { return running }
            if let last = state.lastRefresh, now - last < refreshInterval { return nil }
            state.lastRefresh = now
            state.lastRead = now
            // The task's last step takes the lock, so it clears `refreshing` only after it is set.
            let task = Task { await self.reload() }
            state.refreshing = task
            return task
        }
        guard let task else { return false }
        await task.value
        return true
    }

    /// Reads the JWKS again in the background when the keys are older than ``maxKeyAge`` and no
    /// read is under way (the caller does not wait: its token was verified with the keys held).
    func refreshIfOld() {
        let now = clock.elapsed()
        state.withLock { state in
            guard state.refreshing == nil, now - state.lastRead >= maxKeyAge else { return }
            state.lastRead = now
            state.refreshing = Task { await self.reload() }
        }
    }

    private func reload() async {
        do {
            let keys = try await Self.read(issuer)
            let before = state.withLock { state in
                let before = Set(state.keys.keys)
                state.keys = keys
                state.reads += 1
                state.refreshing = nil
                return before
            }
            let now = Set(keys.keys)
            logger.notice("JWT issuer keys read again", metadata: [
                "issuer": "\(issuer.issuer)", "kids": "\(now.sorted().joined(separator: ","))",
                "added": "\(now.subtracting(before).sorted().joined(separator: ","))",
                "removed": "\(before.subtracting(now).sorted().joined(separator: ","))",
            ])
        } catch {
            state.withLock { state in
                state.reads += 1
                state.refreshing = nil
            }
            logger.error("JWT issuer keys not read again; the keys held stay", metadata: ["issuer": "\(issuer.issuer)", "error": "\(error.message)"])
        }
    }

    // MARK: Reading a JWKS

    /// The usable keys of the issuer's JWKS, from its file or URL.
    static func read(_ issuer: JWTIssuer) async throws(JWTConfigurationError) -> Keys {
        let source: String
        let bytes: [UInt8]
        if let path = issuer.jwksFile {
            source = "the JWKS file \(path)"
            bytes = try readFile(path, issuer: issuer.issuer)
        } else if let text = issuer.jwksURL {
            source = "the JWKS at \(text)"
            bytes = try await fetch(try JWTIssuer.jwksURL(text, issuer: issuer.issuer), issuer: issuer.issuer)
        } else {
            throw JWTConfigurationError("issuer \(issuer.issuer): give the keys as jwksFile or jwksURL")
        }
        return try await parse(bytes, algorithms: issuer.algorithms, source: "issuer \(issuer.issuer): \(source)")
    }

    /// The keys of a JWKS (`{"keys": [JWK, …]}`) usable with `algorithms`, by `kid`. Keys with no
    /// `kid`, meant for encryption (`"use": "enc"`), of another type or too weak (RSA under 2048
    /// bits) are left out; a set left with none is refused.
    static func parse(_ bytes: [UInt8], algorithms: [String], source: String) async throws(JWTConfigurationError) -> Keys {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let entries = object["keys"] as? [Any] else {
            throw JWTConfigurationError("\(source) is not a JWKS ({\"keys\": [...]})")
        }
        let collection = JWTKeyCollection()
        var keys: Keys = [:]
        var skipped: [String] = []
        for (index, entry) in entries.enumerated() {
            guard let fields = entry as? [String: Any], let kid = fields["kid"] as? String, !kid.isEmpty else {
                skipped.append("key \(index) has no kid")
                continue
            }
            if let use = fields["use"] as? String, use != "sig" { continue }
            guard keys[kid] == nil else { throw JWTConfigurationError("\(source) lists kid \(kid) twice") }
            do {
                let data = try JSONSerialization.data(withJSONObject: fields)
                let jwk = try JSONDecoder().decode(JWK.self, from: data)
                try await collection.add(jwk: jwk)
            } catch {
                skipped.append("kid \(kid): \(error)")
                continue
            }
            for algorithm in algorithms {
                // A JWK naming its own `alg` keeps it whatever is asked: the name tells.
                if let key = try? await collection.getKey(for: JWKIdentifier(string: kid), alg: algorithm), key.name == algorithm {
                    keys[kid, default: [:]][algorithm] = key
                }
            }
        }
        guard !keys.isEmpty else {
            let why = skipped.isEmpty ? "" : " (\(skipped.prefix(4).joined(separator: "; ")))"
            throw JWTConfigurationError("\(source) holds no key usable with \(algorithms.joined(separator: ", "))\(why)")
        }
        return keys
    }

    static func readFile(_ path: String, issuer: String) throws(JWTConfigurationError) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw JWTConfigurationError("issuer \(issuer): cannot read the JWKS file \(path)")
        }
        defer { try? handle.close() }
        let data: Data?
        do {
            data = try handle.read(upToCount: maxJWKSBytes + 1)
        } catch {
            throw JWTConfigurationError("issuer \(issuer): cannot read the JWKS file \(path): \(error.localizedDescription)")
        }
        let bytes = Array(data ?? Data())
        guard bytes.count <= maxJWKSBytes else {
            throw JWTConfigurationError("issuer \(issuer): the JWKS file \(path) is larger than \(maxJWKSBytes) bytes")
        }
        return bytes
    }

    /// The body of a `GET` of `url`: `200` only, no redirect followed, at most ``maxJWKSBytes``
    /// within ``fetchTimeout`` (connecting included). HTTPS trusts the system's roots.
    static func fetch(_ url: URL, issuer: String) async throws(JWTConfigurationError) -> [UInt8] {
        do {
            return try await JWKSFetch.get(url, limit: maxJWKSBytes, timeout: fetchTimeout)
        } catch {
            throw JWTConfigurationError("issuer \(issuer): cannot fetch the JWKS at \(url.absoluteString): \(error)")
        }
    }
}
