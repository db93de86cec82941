// Where the run's data goes: a fresh directory on a real disk, never tmpfs, removed at the end
// unless --keep.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the run's data goes: a fresh directory made for this run (and removed after it) inside
/// a parent on a real disk.
public struct DataPlace: Sendable {
    public let run: String
    public let fileSystem: String
    /// Also remove the parent when it ends up empty (the default parent, made by us).
    public let removeParentIfEmpty: String?

    public init(run: String, fileSystem: String, removeParentIfEmpty: String?) {
        self.run = run
        self.fileSystem = fileSystem
        self.removeParentIfEmpty = removeParentIfEmpty
    }

    public func path(_ name: String) -> String { run + "/" + name }

    /// ``make(parent:prefix:)`` for a harness's `main`: says where the data goes and how much
    /// room is left, and exits (status 1) when the place cannot be made or has less than
    /// `requiredFreeBytes` free.
    public static func prepare(parent: String?, prefix: String, requiredFreeBytes: Double) -> (place: DataPlace, free: Double?) {
        let place: DataPlace
        do {
            place = try make(parent: parent, prefix: prefix)
        } catch {
            fail("\(error)", status: 1)
        }
        let free = Machine.freeBytes(at: place.run)
        note("data directory: \(place.run) (\(place.fileSystem), \(free.map(bytes) ?? "?") free)")
        if let free, free < requiredFreeBytes {
            place.remove()
            fail("only \(bytes(free)) free under \(place.run); this run needs about \(bytes(requiredFreeBytes)) (use --dir)", status: 1)
        }
        return (place, free)
    }

    /// Makes `<parent>/<prefix>-<pid>-<unix time>` in `explicit`, or else in the first usable of
    /// <repo>/.build-bench-data, $TMPDIR, /var/tmp and /tmp.
    public static func make(parent explicit: String?, prefix: String) throws -> DataPlace {
        var candidates: [(String, Bool)] = []
        if let explicit {
            candidates.append((explicit, false))
        } else {
            // This file is <repo>/Tools/Benchmarks/Sources/BenchSupport/DataPlace.swift.
            var repo = URL(fileURLWithPath: #filePath)
            for _ in 0..<5 { repo.deleteLastPathComponent() }
            if FileManager.default.fileExists(atPath: repo.appendingPathComponent("Package.swift").path) {
                candidates.append((repo.appendingPathComponent(".build-bench-data").path, true))
            }
            if let tmp = ProcessInfo.processInfo.environment["TMPDIR"], !tmp.isEmpty { candidates.append((tmp, false)) }
            candidates.append(("/var/tmp", false))
            candidates.append(("/tmp", false))
        }
        var reasons: [String] = []
        for (parent, ours) in candidates {
            do {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            } catch {
                reasons.append("\(parent): cannot create (\(error.localizedDescription))")
                continue
            }
            guard let fs = Machine.fileSystem(of: parent) else {
                reasons.append("\(parent): statfs failed")
                continue
            }
            if fs.inMemory {
                reasons.append("\(parent): on \(fs.name), not a real disk (fdatasync would be free)")
                continue
            }
            let run = parent + "/\(prefix)-\(getpid())-\(Int(Date().timeIntervalSince1970))"
            guard mkdir(run, 0o755) == 0 else {
                reasons.append("\(run): mkdir failed (\(String(cString: strerror(errno))))")
                continue
            }
            return DataPlace(run: run, fileSystem: fs.name, removeParentIfEmpty: ours ? parent : nil)
        }
        throw BenchError("no usable data directory:\n  " + reasons.joined(separator: "\n  "))
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: run)
        if let parent = removeParentIfEmpty,
           let left = try? FileManager.default.contentsOfDirectory(atPath: parent), left.isEmpty {
            try? FileManager.default.removeItem(atPath: parent)
        }
    }
}
