import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StrataCore
import StrataLog
import StrataServer
import StrataTestSupport
import Testing

/// `strata serve` under many large state uploads at once: a state is merged as it is read, object
/// by object, so the upload memory budget bounds a state merge's memory as it bounds a push's.
/// Before, each upload was decoded whole, then merged into a decoded copy of the zone and encoded
/// again: about ten times its size each.
@Suite("strata serve: resident memory bounded under concurrent large state uploads")
struct ServeStateUploadBoundsTests {
    /// A projection snapshot payload of about `bytes` bytes: notes of one replica with a 256-byte
    /// title each (objects small enough that a decoded projection is several times their encoded
    /// size, and few enough that a debug build of the server merges 16 × 64 MiB in about a minute
    /// and a half), written straight in the payload's layout (building it through a projection
    /// would take minutes in a debug build). Returns the payload and its object count.
    static func state(bytes: Int, replica: ReplicaID) -> (payload: [UInt8], objects: Int) {
        let title = String(repeating: "t", count: 256)
        var record = ByteWriter()
        EventCodec.writeValue(.string(title), into: &record)
        let value = record.bytes
        let perObject = 16 + 1 + 1 + 12 + 1 + 1 + value.count + 12 + 1
        let objects = bytes / perObject
        var w = ByteWriter(capacity: bytes + 4096)
        w.u8(ProjectionCodec.version)
        w.varint(2)
        w.lengthPrefixed(Array("Note".utf8))
        w.lengthPrefixed(Array("title".utf8))
        w.varint(1)
        w.raw(replica.bytes)
        let base: UInt64 = HLC(milliseconds: 1_700_000_000_000, counter: 0).rawValue
        w.u64(base + UInt64(objects))
        w.varint(UInt64(objects))
        w.varint(1)            // applied sets: replica 0, contiguous through `objects`
        w.varint(0)
        w.varint(UInt64(objects))
        w.varint(0)
        w.varint(0)            // schema events
        w.varint(UInt64(objects))
        for index in 0..<objects {
            let sequence = UInt64(index + 1)
            w.raw(ObjectID(rawValue: UInt128(sequence)).bytes)
            w.varint(0)        // entity "Note"
            w.u8(1)            // has an insert
            w.u64(base + sequence); w.varint(sequence); w.varint(0)
            w.varint(1)        // one field: title
            w.varint(1)
            w.raw(value)
            w.u64(base + sequence); w.varint(sequence); w.varint(0)
            w.varint(0)        // no set members
        }
        return (w.bytes, objects)
    }

    /// `/dev/shm` when it is a memory file system with `bytes` free, else `nil`.
    static func memoryFileSystem(needing bytes: UInt64) -> String? {
        guard let attributes = try? FileManager.default.attributesOfFileSystem(forPath: "/dev/shm"),
              let free = (attributes[.systemFreeSize] as? NSNumber)?.uint64Value, free >= bytes else { return nil }
        return "/dev/shm"
    }

    @Test("16 concurrent 64 MiB state uploads under a 256 MiB upload budget: the server's peak resident memory stays within three budgets and a fixed margin, and every state is merged whole")
    func concurrentStateUploads() async throws {
        let budget = 256 << 20
        let clients = 16
        let dir = TemporaryDirectory()
        let users = dir.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: users))
        // The server's data (a gigabyte of merged snapshots, each fsynced) on a memory file
        // system when there is room: what is measured is the process's memory, and that much
        // disk writing would stall the fsyncs of every test running beside this one. Resident
        // memory does not count a tmpfs file's pages (they are not mapped by the process).
        let data = Self.memoryFileSystem(needing: 3 << 30).map { $0 + "/strata-state-bounds-\(UUID().uuidString)" } ?? dir.sub("server-data")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let server = try ServeChild(data: data, users: users, scratch: dir.path, arguments: [
            "--limit", "uploadMemoryBudget=\(budget)",
            "--limit", "maxStateBytes=\(80 << 20)",
            "--limit", "uploadBudgetWait=30",
            "--limit", "stateUploadLimit.burst=1000",
            "--limit", "stateUploadLimit.requestsPerSecond=100",
        ])
        defer { server.kill9() }

        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = clients * 2
        let session = URLSession(configuration: configuration)
        let url = server.url
        for index in 0..<clients {
            #expect(try await ServeBoundsTests.send(session, url, "PUT", "/v1/zones/healed\(index)", body: []).status == 201)
        }
        // Warm up with a small state (first merge, first snapshot file), then take the baseline.
        let small = Self.state(bytes: 1 << 20, replica: ReplicaID.random())
        let warm = try await ServeBoundsTests.send(session, url, "POST", "/v1/zones/healed0/state", body: small.payload)
        #expect(warm.status == 200, "\(String(decoding: warm.body, as: UTF8.self))")
        let baseline = try server.memory("VmHWM")

        let (payload, objects) = Self.state(bytes: 64 << 20, replica: ReplicaID.random())
        let outcomes = try await withThrowingTaskGroup(of: (merged: Bool, refusals: Int).self) { group in
            for index in 0..<clients {
                group.addTask {
                    var refusals = 0
                    while true {
                        let answer = try await ServeBoundsTests.send(session, url, "POST", "/v1/zones/healed\(index)/state", body: payload)
                        if answer.status == 503 {
                            refusals += 1
                            if refusals > 30 { return (false, refusals) }
                            try await Task.sleep(for: .seconds(answer.retryAfter ?? 1))
                            continue
                        }
                        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                        return (answer.status == 200, refusals)
                    }
                }
            }
            var outcomes: [(merged: Bool, refusals: Int)] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let peak = try server.memory("VmHWM")
        let growth = peak - baseline
        let offered = payload.count * clients
        print("strata serve: \(clients) state uploads of \(payload.count >> 20) MiB (\(objects) objects each, \(offered >> 20) MiB offered) under a \(budget >> 20) MiB budget: VmHWM \(baseline >> 20) MiB before, \(peak >> 20) MiB after (+\(growth >> 20) MiB); \(outcomes.reduce(0) { $0 + $1.refusals }) answers 503 serverBusy, retried")

        // The budget admits four 64 MiB uploads at a time; each holds its bytes and the merged
        // snapshot it writes (the zones start empty), plus the snapshot file's compressed copy as
        // it is written: three budgets and a margin for the allocator. Decoded whole, as before,
        // four uploads at once took about ten times their size: 2.5 GiB.
        #expect(growth < 3 * budget + (64 << 20), "resident memory grew by \(growth >> 20) MiB for a \(budget >> 20) MiB budget")
        #expect(outcomes.allSatisfy { $0.merged }, "\(outcomes.filter { !$0.merged }.count) uploads were never merged")

        // Each merged state is whole: the zone's snapshot holds every object, credited to alice.
        for index in [0, clients - 1] {
            let snapshot = try await ServeBoundsTests.send(session, url, "GET", "/v1/zones/healed\(index)/snapshot")
            #expect(snapshot.status == 200)
            let merged = try StateUpload(payload: Array(snapshot.body))
            #expect(merged.objectCount == objects, "zone healed\(index)")  // the small state's objects are among them (the same IDs)
        }
        #expect(server.process.isRunning, "strata serve died: \(server.stderr)")
    }
}
