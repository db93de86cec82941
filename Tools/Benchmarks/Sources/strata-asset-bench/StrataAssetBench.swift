// strata-asset-bench: assets over loopback HTTP against the log server (embedded storage, and
// PostgreSQL with --postgres) in a child process — upload throughput next to an fsynced write of the same bytes, memory while
// importing and uploading one 5 GiB asset, lazy fetch latency of 1 MiB assets, and the cold open
// of a store with 10,000 photos next to the same notes without — and prints a markdown table.
//
//     swift run -c release --package-path Tools/Benchmarks strata-asset-bench [--quick] [--big] [--only LIST] [--dir PATH] [--keep] [--postgres URL]
//     BENCH_PRODUCT=strata-asset-bench bash Tools/scripts/postgres-bench.sh [FLAGS]   # with a throwaway cluster
import BenchSupport
import Foundation

struct Settings {
    var quick = false
    var big = false
    var parent: String?
    var keep = false
    /// A PostgreSQL database rows 1 and 3 also run against (a server child serving it).
    var postgres: String?
    static let workloads: Set<String> = ["upload", "big", "fetch", "photos"]
    var only: Set<String> = ["upload", "fetch", "photos"]
    /// The HTTP clients rows 1 and 3 run with, each in its own rows; row 2 runs with the first.
    var exchanges = Exchange.allCases

    var uploadBytes: Int { quick ? 128 << 20 : 1 << 30 }
    var bigBytes: Int { quick ? 512 << 20 : 5 << 30 }
    var fetches: Int { quick ? 50 : 200 }
    var photos: Int { quick ? 1000 : 10_000 }
    let photoSize = 30_000
    /// Cold opens of each store, alternating: single opens on a shared 2-core machine vary by
    /// 2× (22–66 ms measured), so three runs do not settle a 10% goal.
    var openRuns: Int { quick ? 1 : 11 }
    var requiredFreeBytes: Double {
        // Row 1: the media, its fsynced copy (removed before the import), the store and the
        // server's copy; row 2: the file, the store's copy and the server's (removed after).
        Double((2 + exchanges.count) * uploadBytes + (only.contains("big") ? 3 * bigBytes : 0) + 2 * photos * photoSize + (512 << 20))
    }
}

let usage = """
    usage: strata-asset-bench [--quick] [--big] [--only LIST] [--dir PATH] [--keep] [--postgres URL]
           strata-asset-bench --serve DATA PORT USERS [POSTGRES_URL]
           strata-asset-bench --open-child STORE

      --quick         128 MiB instead of 1 GiB to upload, 512 MiB instead of 5 GiB for --big,
                      50 fetches instead of 200, 1,000 photos instead of 10,000, one open each
                      instead of 11 (numbers are not meaningful)
      --big           also run row 2: import and upload one 5 GiB asset, memory of both processes
                      (writes 15 GiB: the file, the store's copy, the server's copy)
      --exchanges LIST
                      the HTTP clients under HTTPSyncTransport: URLSession (the default transport;
                      FoundationNetworking on Linux) and AsyncHTTPClient, comma-separated (default
                      both; rows 1 and 3 run once with each, row 2 with the first)
      --only LIST     run only some of upload (row 1), big (row 2), fetch (row 3), photos (row 4),
                      comma-separated
      --dir PATH      make the run's fresh data directory inside PATH (a real disk, not tmpfs);
                      default: <repo>/.build-bench-data, else $TMPDIR or /var/tmp
      --keep          leave the data directory in place
      --postgres URL  also run rows 1 and 3 against a server child on the PostgreSQL storage in
                      this database (BENCH_PRODUCT=strata-asset-bench Tools/scripts/postgres-bench.sh
                      starts a throwaway cluster and passes one)
      --serve DATA PORT USERS [POSTGRES_URL]
                      run the log server on 127.0.0.1:PORT (what the benchmark runs as its child),
                      on the embedded storage in DATA or on the PostgreSQL database
      --open-child STORE
                      open STORE, count its notes, print one line of JSON (open time, VmRSS)
    """

/// Whether /proc/cpuinfo lists `sha_ni`: StrataCore's hasher uses the SHA instructions when it
/// does (its `SHA256Hasher.usesHardware` is package-internal, out of this package's reach).
let cpuHasSHAExtensions: Bool = {
    guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return false }
    return text.split(separator: "\n").contains { $0.hasPrefix("flags") && $0.split(separator: " ").contains("sha_ni") }
}()

@main
struct StrataAssetBench {
    static func main() async {
        var settings = Settings()
        var arguments = Arguments(usage: usage)
        while let argument = arguments.next() {
            switch argument {
            case "--serve":
                let data = arguments.value(of: argument, "DATA PORT USERS")
                let port = arguments.number(of: argument, atLeast: 0)
                let users = arguments.value(of: argument, "DATA PORT USERS")
                await ServeChild.run(data: data, port: port, users: users, postgres: arguments.next())
            case "--open-child":
                await OpenChild.run(arguments.value(of: argument, "a store path"))
            case "--quick": settings.quick = true
            case "--big": settings.big = true; settings.only.insert("big")
            case "--keep": settings.keep = true
            case "--postgres": settings.postgres = arguments.value(of: argument, "URL")
            case "--only": settings.only = arguments.names(of: argument, from: Settings.workloads)
            case "--exchanges":
                let names = arguments.value(of: argument, "a list").split(separator: ",").map(String.init)
                let chosen = names.compactMap(Exchange.init(rawValue:))
                if chosen.isEmpty || chosen.count != names.count { arguments.wrong("--exchanges takes URLSession and AsyncHTTPClient, comma-separated") }
                settings.exchanges = chosen
            case "--dir": settings.parent = arguments.value(of: argument, "a path")
            case "-h", "--help":
                print(usage)
                return
            default: arguments.wrong("unknown argument \(argument)")
            }
        }
        let (place, free) = DataPlace.prepare(parent: settings.parent, prefix: "strata-asset-bench", requiredFreeBytes: settings.requiredFreeBytes)
        do {
            try await run(settings, place, freeBytes: free)
        } catch {
            if !settings.keep { place.remove() }
            fail("benchmark failed: \(error)", status: 1)
        }
        if settings.keep { note("kept \(place.run)") } else { place.remove() }
    }

    static func mbps(_ bytes: Int, _ nanos: UInt64) -> Double { nanos == 0 ? 0 : Double(bytes) / 1e6 / seconds(nanos) }

    static func run(_ settings: Settings, _ place: DataPlace, freeBytes: Double?) async throws {
        let started = Date()
        var report = Report()
        // Row 2 first: its client memory is measured in a process that has done nothing else yet.
        if settings.only.contains("big") {
            let big = try await bigRun(place, size: settings.bigBytes, exchange: settings.exchanges[0])
            let mib = Double(1 << 20)
            let importGrowth = big.clientImportPeak - big.clientImportBaseline
            let clientGrowth = big.clientUploadPeak - big.clientUploadBaseline
            let serverGrowth = big.serverUploadPeak - big.serverBaseline
            let worst = max(importGrowth, clientGrowth, serverGrowth)
            note("  import \(fixed(mbps(big.size, big.importNanos), 0)) MB/s, +\(bytes(Double(importGrowth))); upload \(fixed(mbps(big.size, big.uploadNanos), 0)) MB/s, client +\(bytes(Double(clientGrowth))), server +\(bytes(Double(serverGrowth)))")
            report.add("2. one \(bytes(Double(big.size))) asset: import, then upload by sync() over \(settings.exchanges[0].rawValue) to a fresh server child; peak VmHWM − VmRSS before the phase, per process\(big.peaksReset ? " (VmHWM reset by /proc/PID/clear_refs before each phase)" : " (**VmHWM could not be reset: peaks since process start**)")",
                       "client import: \(bytes(Double(big.clientImportBaseline))) → peak \(bytes(Double(big.clientImportPeak))) (+\(bytes(Double(importGrowth)))), \(fixed(mbps(big.size, big.importNanos), 0)) MB/s; client upload: \(bytes(Double(big.clientUploadBaseline))) → peak \(bytes(Double(big.clientUploadPeak))) (+\(bytes(Double(clientGrowth)))); server upload: \(bytes(Double(big.serverBaseline))) → peak \(bytes(Double(big.serverUploadPeak))) (+\(bytes(Double(serverGrowth)))), \(fixed(mbps(big.size, big.uploadNanos), 0)) MB/s",
                       "≤ +64 MiB",
                       "worst +\(fixed(Double(worst) / mib, 1)) MiB — " + (Double(worst) <= 64 * mib ? "PASS" : "**MISS**"))
        }
        let backends: [(name: String, postgres: String?)] = [("embedded", nil)] + (settings.postgres.map { [("PostgreSQL", $0)] } ?? [])
        for backend in backends where !settings.only.isDisjoint(with: ["upload", "fetch"]) {
            let server = try ServerProcess.start(data: place.path("server-\(backend.name)"), directory: place.run, postgres: backend.postgres)
            defer { server.stop() }
            note("server (\(backend.name)): pid \(server.pid) on \(server.url.absoluteString)")
            let on = backends.count > 1 ? ", \(backend.name)" : ""
            if settings.only.contains("upload") {
                let up = try await uploadRun(place, server: server, totalBytes: settings.uploadBytes, exchanges: settings.exchanges)
                let fsyncRate = mbps(up.bytes, up.fsyncNanos)
                note("  fsync-write \(fixed(fsyncRate, 0)) MB/s")
                report.add("1a\(on). baseline: the same \(bytes(Double(up.bytes))) (\(grouped(up.files)) files: \(up.videos) videos of 50 MB, \(grouped(up.files - up.videos)) photos of ~300 KB, seeded random bytes) copied from the page cache in 1 MiB writes, fsync at the end of each file",
                           "\(fixed(fsyncRate, 0)) MB/s (\(fixed(seconds(up.fsyncNanos), 2)) s)", "baseline", "—")
                var letter = UInt8(ascii: "b")
                func label() -> String {
                    defer { letter += 1 }
                    return "1" + String(Character(Unicode.Scalar(letter))) + on
                }
                for side in up.sides {
                    let importRate = mbps(up.bytes, side.importNanos)
                    report.add("\(label()). import (before the \(side.exchange.rawValue) upload): `importAsset(contentsOf:mediaType:fileName:)` of each file into a fresh store",
                               "\(fixed(importRate, 0)) MB/s (\(fixed(seconds(side.importNanos), 2)) s, client CPU \(fixed(side.importCPU, 2)) s); CPU has SHA extensions (sha_ni): \(cpuHasSHAExtensions ? "yes" : "no")",
                               "informational", "\(fixed(importRate / fsyncRate, 2))× 1a")
                    let uploadRate = mbps(up.bytes, side.uploadNanos)
                    let chunkMean = side.seen.chunks == 0 ? 0 : side.seen.chunkNanos / UInt64(side.seen.chunks)
                    report.add("\(label()). upload over \(side.exchange.rawValue)\(side.exchange == .urlSession ? " (the default transport)" : ""): one sync() of that store to a fresh zone; first beginAssetUpload → last chunk answered",
                               "\(fixed(uploadRate, 0)) MB/s (\(fixed(seconds(side.uploadNanos), 2)) s; \(grouped(side.seen.uploads)) uploads, \(grouped(side.seen.chunks)) chunk PUTs of \(latency(chunkMean)) each on average, several in flight); the whole sync() \(fixed(seconds(side.syncNanos), 2)) s with \(side.seen.pushes) push\(side.seen.pushes == 1 ? "" : "es") of \(grouped(side.seen.pushedTransactions)) tx; CPU during sync(): client \(fixed(side.clientCPU, 2)) s, server \(fixed(side.serverCPU, 2)) s\(backend.postgres == nil ? "" : " (PostgreSQL's own processes not counted)")",
                               "≥ 0.5× 1a", verdict(uploadRate / fsyncRate, goal: 0.5, unit: "× 1a"))
                }
            }
            if settings.only.contains("fetch") {
                for (i, exchange) in settings.exchanges.enumerated() {
                    let fetch = try await fetchRun(place, server: server, count: settings.fetches, exchange: exchange, backend: backend.name)
                    let sorted = fetch.latencies.sorted()
                    let p99 = percentile(sorted, 99)
                    let manifests = fetch.manifestNanos.sorted()
                    let chunks = fetch.chunkNanos.sorted()
                    note("  p50 \(latency(percentile(sorted, 50))), p99 \(latency(p99))")
                    report.add("3\(Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(i))))\(on). lazy fetch over \(exchange.rawValue): a fresh device (synced notes) calls `store.asset(_:)` once for each of \(sorted.count) distinct 1 MiB assets, not held → file installed",
                               "p50 \(latency(percentile(sorted, 50))), p99 \(latency(p99)), max \(latency(sorted.last ?? 0)), first \(latency(fetch.latencies.first ?? 0)); of which the manifest GET p50 \(latency(percentile(manifests, 50))) / p99 \(latency(percentile(manifests, 99))), the chunk GET p50 \(latency(percentile(chunks, 50))) / p99 \(latency(percentile(chunks, 99)))",
                               "p99 ≤ 20 ms",
                               "\(fixed(Double(p99) / 20e6, 2))× the bound — " + (p99 <= 20_000_000 ? "PASS" : "**MISS**"))
                }
            }
        }
        if settings.only.contains("photos") {
            let photos = try await photoStoreRun(place, photos: settings.photos, photoSize: settings.photoSize, runs: settings.openRuns)
            let openWith = PhotoStoreRun.median(photos.withPhotos) { $0.openSeconds }
            let openWithout = PhotoStoreRun.median(photos.without) { $0.openSeconds }
            let rssWith = PhotoStoreRun.median(photos.withPhotos) { Double($0.rssAfterOpen) }
            let rssWithout = PhotoStoreRun.median(photos.without) { Double($0.rssAfterOpen) }
            let worst = max(openWith / openWithout, rssWith / rssWithout)
            note("  open \(fixed(openWith * 1000, 1)) ms vs \(fixed(openWithout * 1000, 1)) ms; RSS \(bytes(rssWith)) vs \(bytes(rssWithout))")
            let times = { (probes: [OpenProbe]) in probes.map { fixed($0.openSeconds * 1000, 1) }.joined(separator: ", ") + " ms" }
            report.add("4. cold open (fresh process, median of \(photos.withPhotos.count)) of a store of \(grouped(photos.photos)) notes each with a \(bytes(Double(photos.photoBytes))) photo, next to the same notes without photos",
                       "open \(fixed(openWith * 1000, 1)) ms vs \(fixed(openWithout * 1000, 1)) ms (runs: \(times(photos.withPhotos)) vs \(times(photos.without))); VmRSS after open \(bytes(rssWith)) vs \(bytes(rssWithout)); on disk \(bytes(Double(photos.diskWith))) vs \(bytes(Double(photos.diskWithout))); built (import + notes) in \(fixed(seconds(photos.buildNanos), 1)) s",
                       "≤ 1.1× (time and memory)",
                       "\(fixed(openWith / openWithout, 2))× time, \(fixed(rssWith / rssWithout, 2))× memory — " + (worst <= 1.1 ? "PASS" : "**MISS**"))
        }
        report.machine = "**Machine:** \(Machine.cores) cores"
            + (Machine.cpuModel.map { " (\($0))" } ?? "")
            + ", " + (Machine.memoryBytes.map { bytes($0) + " RAM" } ?? "RAM unknown")
            + ", data on \(place.fileSystem)" + (freeBytes.map { " (\(bytes($0)) free)" } ?? "")
            + ", server (embedded storage\(settings.postgres == nil ? "" : ", then PostgreSQL") in a child process on loopback HTTP, \(timestamp(started))"
            + (settings.quick ? " — **--quick run: numbers are not meaningful**" : "")
        print("`" + (["swift run -c release --package-path Tools/Benchmarks strata-asset-bench"] + CommandLine.arguments.dropFirst()).joined(separator: " ") + "`\n")
        print(report.render())
    }
}
