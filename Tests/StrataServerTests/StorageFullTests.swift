import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Strata
@testable import StrataLog
@testable import StrataServer
import StrataProtocol
import StrataTestSupport
import Testing
import StrataCore

/// A full disk, two ways: the data directory on a small tmpfs the test mounts and fills with a
/// file (where this process may mount one: root with CAP_SYS_ADMIN), and the log's writes failing
/// with an injected `ENOSPC` (everywhere; where tmpfs cannot be mounted the tmpfs case says so and
/// runs injected too, so neither case is ever skipped). Pushes are acknowledged, the disk fills,
/// the next push is answered `507 storageFull`, space returns, and pushes succeed again without a
/// restart — every acknowledged transaction pulled back exactly once, before and after a restart.
@Suite("Disk full: 507 storageFull, nothing acknowledged lost, recovery without a restart")
struct StorageFullTests {
    /// Whether this process may mount a tmpfs (tried once on a scratch directory).
    static let canMount: Bool = {
        guard geteuid() == 0 else { return false }
        let probe = TemporaryDirectory("tmpfs-probe")
        guard (try? mount(probe.path, bytes: 1 << 20)) != nil else { return false }
        unmount(probe.path)
        return true
    }()

    static func mount(_ path: String, bytes: Int) throws {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/mount")
        process.arguments = ["-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw MountError() }
    }

    static func unmount(_ path: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/umount")
        process.arguments = [path]
        try? process.run()
        process.waitUntilExit()
    }

    struct MountError: Error {}

    /// How the test fills the disk and frees it again.
    enum Filling: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case tmpfs
        case injected

        var testDescription: String { rawValue }
    }

    /// A data directory whose disk the test can fill.
    final class Disk: Sendable {
        let data: String
        let filling: Filling
        private let mountPoint: String?
        private let filler: String

        init(_ dir: TemporaryDirectory, _ wanted: Filling) throws {
            let root = dir.sub("disk")
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            if wanted == .tmpfs, StorageFullTests.canMount {
                try StorageFullTests.mount(root, bytes: 4 << 20)
                mountPoint = root
                filling = .tmpfs
            } else {
                if wanted == .tmpfs {
                    print("StorageFullTests: this process may not mount a tmpfs (uid \(geteuid())); the tmpfs case runs with injected ENOSPC")
                }
                mountPoint = nil
                filling = .injected
            }
            data = root + "/data"
            filler = root + "/filler"
        }

        deinit {
            FaultInjection.clear(data)
            if let mountPoint { StorageFullTests.unmount(mountPoint) }
        }

        func fill() throws {
            switch filling {
            case .tmpfs: #expect(try StorageFullTests.fill(filler) > 0)
            case .injected: FaultInjection.failWrites(under: data, errno: ENOSPC)
            }
        }

        func free() throws {
            switch filling {
            case .tmpfs: try FileManager.default.removeItem(atPath: filler)
            case .injected: FaultInjection.clear(data)
            }
        }
    }

    /// A note whose title is `bytes` random letters (compression cannot shrink it much).
    func bulky(_ replica: ReplicaID, _ sequence: UInt64, bytes: Int) -> TransactionRecord {
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return transaction(replica, sequence...sequence, title: String((0..<bytes).map { _ in letters.randomElement() ?? "a" }))
    }

    /// Writes a file until the file system refuses more (ENOSPC): the disk is full.
    static func fill(_ path: String) throws -> Int {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        var total = 0
        for size in [65_536, 4_096, 512, 1] {
            let chunk = [UInt8](repeating: 0x5A, count: size)
            while true {
                let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, size) }
                if n <= 0 { break }
                total += n
            }
        }
        #expect(errno == ENOSPC)
        return total
    }

    /// Every pulled transaction's replica and first sequence, in order.
    func pulledIDs(_ client: any TestClientProtocol) async throws -> [String] {
        let response = try await client.pull("notes", query: "limit=10000")
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        return try pulledTransactions(response).map { "\($0.replica):\($0.sequences?.lowerBound ?? 0)" }
    }

    @Test("pushes acknowledged, disk fills, push answered 507, space returns, the retried push and a new one succeed; every acknowledged transaction pulled exactly once, also after a restart",
          arguments: Filling.allCases)
    func diskFullAndRecovery(_ filling: Filling) async throws {
        let dir = TemporaryDirectory()
        let disk = try Disk(dir, filling)
        let data = disk.data

        let users = try UserDirectory(tokens: ["alice": Token.alice])
        let replica = ReplicaID.random()
        let storage = try EmbeddedZoneStorage(directory: data)
        let app = StrataServerApp(storage: storage, users: users, configuration: ServerConfiguration(port: 0))
        let record = bulky(replica, 5, bytes: 40_000)
        let acknowledged = try await app.buildApplication().test(.router) { client -> [String] in
            var acknowledged: [String] = []
            try await client.createZone("notes")
            for sequence in 1...4 as ClosedRange<UInt64> {
                let response = try await client.push("notes", [bulky(replica, sequence, bytes: 40_000)])
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                acknowledged.append("\(replica):\(sequence)")
            }

            // The disk fills up: the next push is answered 507, not 500, and nothing of it is kept.
            try disk.fill()
            let refused = try await client.push("notes", [record])
            #expect(refused.status.code == 507, "\(String(buffer: refused.body))")
            #expect(try errorBody(refused).code == "storageFull")
            // Pulls still answer, with exactly what was acknowledged.
            #expect(try await pulledIDs(client) == acknowledged)
            let stillFull = try await client.push("notes", [record])
            #expect(stillFull.status.code == 507, "\(String(buffer: stillFull.body))")
            #expect(String(decoding: app.metrics.exposition(), as: UTF8.self).contains("strata_storage_full_total 2"))

            // Space returns: the same push (the client's retry) and a new one go through, no restart.
            try disk.free()
            let retried = try await client.push("notes", [record])
            #expect(retried.status == .ok, "\(String(buffer: retried.body))")
            acknowledged.append("\(replica):5")
            let next = try await client.push("notes", [bulky(replica, 6, bytes: 40_000)])
            #expect(next.status == .ok, "\(String(buffer: next.body))")
            acknowledged.append("\(replica):6")
            #expect(try await pulledIDs(client) == acknowledged)
            return acknowledged
        }
        try await storage.close()

        // After a restart: the same transactions, each once, and the refused one's bytes are the retry's.
        let reopened = try EmbeddedZoneStorage(directory: data)
        let again = StrataServerApp(storage: reopened, users: users, configuration: ServerConfiguration(port: 0))
        try await again.buildApplication().test(.router) { client in
            #expect(try await pulledIDs(client) == acknowledged)
            let pulled = try pulledTransactions(try await client.pull("notes", query: "limit=10000"))
            #expect(pulled.count == 6)
            #expect(pulled.count >= 5 && pulled[4].encoded() == record.encoded())
        }
        try await reopened.close()
        withExtendedLifetime(disk) {}  // unmounted only now
    }
}
