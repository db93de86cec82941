import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Logging

/// The process's open-files limit (`RLIMIT_NOFILE`, `ulimit -n`) against the connection cap:
/// every connection holds a descriptor, and the storage holds more (segment files, the
/// listening socket), so a cap above the limit would end in failed `accept`s rather than clean
/// `503 serverBusy` answers.
enum FileDescriptorLimit {
    /// Descriptors kept for the storage and the process besides connections.
    static let reserve: UInt64 = 256

    /// The descriptors kept for the storage, the listening socket and accepts under a soft limit
    /// of `limit`: ``reserve``, or a quarter of a small limit (at least 32).
    static func reserve(under limit: UInt64) -> UInt64 { min(reserve, max(32, limit / 4)) }

    /// The connections a soft limit of `limit` leaves room for, with `openNow` descriptors held
    /// already (the storage's: about two per zone) and the reserve kept for what comes later
    /// (`Int.max` when the limit is unknown).
    static func connectionRoom(under limit: UInt64?, openNow: Int = 0) -> Int {
        guard let limit else { return .max }
        let kept = reserve(under: limit) + UInt64(max(0, openNow))
        return Int(clamping: limit > kept ? limit - kept : 1)
    }

    /// Descriptors the process holds now (`/proc/self/fd`; 0 where that cannot be read).
    static func openNow() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    /// The soft open-files limit in force now (`nil` if it cannot be read).
    static func soft() -> UInt64? {
        var limit = rlimit()
        guard getrlimit(resourceNumber, &limit) == 0 else { return nil }
        return UInt64(limit.rlim_cur)
    }

    /// Raises the soft limit to fit `room` connections when the hard limit allows, and warns
    /// when it cannot. Returns the soft limit in force afterwards (`nil` if it could not be read).
    @discardableResult
    static func ensure(room connections: Int, logger: Logger) -> UInt64? {
        var limit = rlimit()
        guard getrlimit(resourceNumber, &limit) == 0 else {
            logger.warning("could not read the open-files limit (getrlimit)", metadata: ["errno": "\(errno)"])
            return nil
        }
        let needed = UInt64(max(0, connections)) + reserve
        let soft = UInt64(limit.rlim_cur)
        let hard = UInt64(limit.rlim_max)
        guard soft < needed else { return soft }
        if hard >= needed {
            var raised = limit
            raised.rlim_cur = rlim_t(needed)
            if setrlimit(resourceNumber, &raised) == 0 {
                logger.info("raised the open-files limit for the connection cap", metadata: [
                    "from": "\(soft)", "to": "\(needed)", "maxConnections": "\(connections)",
                ])
                return needed
            }
        }
        logger.warning("the open-files limit is below the connection cap: the cap is lowered to what it leaves room for; raise `ulimit -n` (LimitNOFILE) to serve more connections", metadata: [
            "openFilesLimit": "\(soft)", "hardLimit": "\(hard)", "maxConnections": "\(connections)", "needed": "\(needed)",
        ])
        return soft
    }

    #if canImport(Glibc)
    private static let resourceNumber = __rlimit_resource_t(UInt32(RLIMIT_NOFILE.rawValue))
    #else
    private static let resourceNumber = RLIMIT_NOFILE
    #endif
}
