import Crypto
import Foundation
import StrataCore
import StrataLog

/// The files in a zone's directory that keep its replica ledgers across restarts, beside the
/// zone's segment log (which the log itself ignores):
///
/// - `replicas.json`: `{"formatVersion": 1, "replicas": [{"replica": "<uuid>", "user": "<name>"}]}`,
///   which user each replica belongs to. Replaced atomically (temporary file, `fsync`, `rename`,
///   `fsync` of the directory) before the first push of a new replica is appended, so an
///   acknowledged push always has its owner on disk.
/// - `replica-owners.json` (in the data directory itself, not a zone's): the same layout, which
///   user each replica belongs to server-wide (``EmbeddedZoneStorage``'s replica bindings).
/// - `retired-digests`: the digests of the transactions that compaction retired from the log
///   (the log's own entries give the digests of the rest). Written atomically before segments
///   are retired. Layout, little-endian: magic `STRD`, version `1` (1 byte), the position it
///   covers up to (u64: every transaction below it), the count (u64), then per transaction the
///   replica (its high then low 64 bits, u64 each), first and last sequence (u64 each), position (u64) and
///   digest (16 bytes); then the SHA-256 of everything before it (32 bytes).
enum ZoneLedgerFiles {
    static let ownersName = "replicas.json"
    static let retiredDigestsName = "retired-digests"
    private struct OwnersFile: Codable {
        struct Entry: Codable {
            var replica: ReplicaID
            var user: String
        }
        var formatVersion: Int
        var replicas: [Entry]
    }

    static func loadOwners(in directory: String, zone: ZoneID?, named name: String = ownersName) throws(ZoneStorageError) -> [ReplicaID: String] {
        try loadOwnersIfPresent(in: directory, zone: zone, named: name) ?? [:]
    }

    /// The owners in `directory/name`, `nil` when there is no such file.
    static func loadOwnersIfPresent(in directory: String, zone: ZoneID?, named name: String) throws(ZoneStorageError) -> [ReplicaID: String]? {
        let path = DurableFile.join(directory, name)
        guard let bytes = try DurableFile.read(path) else { return nil }
        guard let file = try? JSONDecoder().decode(OwnersFile.self, from: Data(bytes)), file.formatVersion == 1 else {
            throw ZoneStorageError(.storageFailure, "\(path) is damaged or of an unknown format version", zone: zone?.description)
        }
        var owners: [ReplicaID: String] = [:]
        for entry in file.replicas { owners[entry.replica] = entry.user }
        return owners
    }

    static func saveOwners(_ owners: [ReplicaID: String], in directory: String, named name: String = ownersName) throws(ZoneStorageError) {
        let file = OwnersFile(formatVersion: 1, replicas: owners.sorted { $0.key < $1.key }.map { .init(replica: $0.key, user: $0.value) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(file) else {
            throw ZoneStorageError(.storageFailure, "cannot encode the replica owners of \(directory)")
        }
        try DurableFile.writeAtomically(Array(data), to: DurableFile.join(directory, name))
    }

    private static let magic: [UInt8] = Array("STRD".utf8)

    static func saveRetiredDigests(_ ledgers: [ReplicaID: ReplicaLedger], below cutoff: UInt64, in directory: String) throws(ZoneStorageError) {
        var held: [(ReplicaID, HeldTransaction)] = []
        for (replica, ledger) in ledgers {
            for transaction in ledger.transactions where transaction.position < cutoff { held.append((replica, transaction)) }
        }
        var w = ByteWriter(capacity: 64 + held.count * 64)
        w.raw(magic)
        w.u8(1)
        w.u64(cutoff)
        w.u64(UInt64(held.count))
        for (replica, transaction) in held {
            w.u64(UInt64(truncatingIfNeeded: replica.rawValue >> 64))
            w.u64(UInt64(truncatingIfNeeded: replica.rawValue))
            w.u64(transaction.first)
            w.u64(transaction.last)
            w.u64(transaction.position)
            w.u64(transaction.digest.high)
            w.u64(transaction.digest.low)
        }
        w.raw(SHA256.hash(data: w.bytes))
        try DurableFile.writeAtomically(w.bytes, to: DurableFile.join(directory, retiredDigestsName))
    }

    /// The retired transactions' digests and the position they cover up to; `nil` when the zone
    /// was never compacted by a server that kept them.
    static func loadRetiredDigests(in directory: String, zone: ZoneID) throws(ZoneStorageError) -> (cutoff: UInt64, held: [(ReplicaID, HeldTransaction)])? {
        let path = DurableFile.join(directory, retiredDigestsName)
        guard let bytes = try DurableFile.read(path) else { return nil }
        let damaged = ZoneStorageError(.storageFailure, "\(path) is damaged (bad length, magic or checksum)", zone: zone.description)
        guard bytes.count >= 4 + 1 + 16 + 32 else { throw damaged }
        let body = Array(bytes.dropLast(32))
        guard Array(SHA256.hash(data: body)) == Array(bytes.suffix(32)), Array(body.prefix(4)) == magic, body[4] == 1 else { throw damaged }
        let parsed = body.withUnsafeBytes { raw -> (cutoff: UInt64, held: [(ReplicaID, HeldTransaction)])? in
            var r = ByteReader(raw, offset: 5)
            guard let cutoff = r.u64(), let count = r.u64(), count <= UInt64(raw.count / 56) else { return nil }
            var held: [(ReplicaID, HeldTransaction)] = []
            held.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let rh = r.u64(), let rl = r.u64(), let first = r.u64(), let last = r.u64(), let position = r.u64(),
                      let dh = r.u64(), let dl = r.u64() else { return nil }
                let replica = ReplicaID(rawValue: UInt128(rh) << 64 | UInt128(rl))
                held.append((replica, HeldTransaction(first: first, last: last, position: position, digest: TransactionDigest(high: dh, low: dl))))
            }
            return (cutoff, held)
        }
        guard let parsed else { throw damaged }
        return parsed
    }
}
