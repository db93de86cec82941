import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import StrataServer
import StrataTestSupport
import Testing

/// `strata serve` when idle connections would take every descriptor: the connection cap is
/// lowered to what the open-files limit leaves room for, and at the cap the connection idle the
/// longest is closed for a new one, so real requests are still served. Before, 300 idle
/// connections under a limit of 256 descriptors left a real request waiting in the kernel's
/// accept queue until it timed out.
@Suite("strata serve: real requests served when idle connections would take every descriptor")
struct ServeDescriptorTests {
    /// A TCP connection to 127.0.0.1:`port` that sends nothing (its descriptor, or -1).
    static func idleConnection(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// Whether the server closed the connection (a read finds its end), without waiting.
    static func closedByServer(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }

    @Test("300 idle connections to a server limited to 256 descriptors: a real request is still answered within seconds, the idle connections are closed for it, and the server keeps serving")
    func idleConnectionsDoNotStarveRequests() async throws {
        // This process holds 300 sockets besides whatever the other tests hold.
        var own = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        if own.rlim_cur < 4096, own.rlim_max >= 4096 {
            own.rlim_cur = 4096
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        }
        let dir = TemporaryDirectory()
        let users = dir.sub("users.json")
        let entry = UserDirectory.User(name: "alice", tokenSHA256: UserDirectory.digest(of: "alice-secret"))
        try JSONEncoder().encode(["users": [entry]]).write(to: URL(fileURLWithPath: users))
        let server = try ServeChild(data: dir.sub("server-data"), users: users, scratch: dir.path, arguments: [
            // Every idle connection from one address: the per-address cap is not what is tested.
            "--limit", "maxConnectionsPerAddress=1000",
        ], openFilesLimit: 256)
        defer { server.kill9() }
        let port = try #require(server.url.port)

        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<300 {
            let fd = Self.idleConnection(port: port)
            if fd >= 0 { idle.append(fd) }
        }
        #expect(idle.count == 300, "only \(idle.count) idle connections could be opened")
        // Give the server time to accept what it will.
        try await Task.sleep(for: .seconds(2))

        // Answered, not left waiting for an idle connection to time out (60 s): a request
        // that gets no answer in 45 s fails. (How soon it is answered is not measured here: a
        // loaded machine running every suite at once delays it by seconds.)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 45
        let session = URLSession(configuration: configuration)
        for attempt in 1...3 {
            let answer = try await ServeBoundsTests.send(session, server.url, "GET", "/v1/zones")
            #expect(answer.status == 200, "request \(attempt): \(answer.status)")
        }
        let shed = idle.filter(Self.closedByServer).count
        print("strata serve under 256 descriptors: \(idle.count) idle connections opened, \(shed) closed by the server to make room")
        #expect(shed > 0, "no idle connection was closed for the real requests")
        #expect(server.process.isRunning, "strata serve died: \(server.stderr)")
    }
}
