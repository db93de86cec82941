// The asset workloads: seeded incompressible media files, the fsynced-write baseline, import and
// upload through a SyncEngine, the 5 GiB asset's memory, lazy fetches, and the photo store.
import BenchSupport
import Foundation
@_spi(StrataInternals) import Strata
import StrataCore
import StrataProtocol
import StrataSync
import StrataSyncAsyncHTTPClient
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

let mebibyte = 1 << 20

/// Notes with an optional photo: the photo store and the plain store share it.
let assetSchema = Schema {
    Entity("Note", attributes: [
        Attribute("title", .string, default: ""),
        Attribute("body", .string, default: ""),
        Attribute("photo", .asset),
    ])
}

func openStore(_ path: String) async throws -> Store {
    var options = StoreOptions(durability: .groupCommit)
    // Nothing in these rows is about compaction; keep the stores' logs as written.
    options.autoCompaction = .disabled
    return try await Store.open(at: path, schema: assetSchema, options: options)
}

/// The fields of note `i` (the same with and without a photo).
func noteValues(_ i: Int) -> [String: Value] {
    ["title": .string("note \(i)"), "body": .string("taken on day \(i % 365), roll \(i / 365), frame \(i % 36)")]
}

// MARK: Media

/// A media file of the run: seeded random bytes, incompressible like real JPEG or H.264.
struct MediaFile {
    var path: String
    var size: Int
    var mediaType: String
}

/// Fills `buffer` with the next bytes of `rng`.
func fillRandom(_ buffer: UnsafeMutableRawBufferPointer, _ rng: inout SplitMix64) {
    let words = buffer.bindMemory(to: UInt64.self)
    for i in words.indices { words[i] = rng.next() }
}

/// `size` seeded random bytes.
func randomBytes(_ size: Int, seed: UInt64) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    var bytes = [UInt8](repeating: 0, count: (size + 7) & ~7)
    bytes.withUnsafeMutableBytes { fillRandom($0, &rng) }
    bytes.removeLast(bytes.count - size)
    return bytes
}

/// Writes `size` seeded random bytes to `path` in 1 MiB writes (not synced: a source file, as a
/// camera roll's would be, read from the page cache afterwards).
func writeRandomFile(_ path: String, size: Int, seed: UInt64) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var rng = SplitMix64(seed: seed)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: mebibyte, alignment: 8)
    defer { buffer.deallocate() }
    var left = size
    while left > 0 {
        fillRandom(buffer, &rng)
        let n = min(left, mebibyte)
        guard write(fd, buffer.baseAddress, n) == n else { throw BenchError("write \(path): \(String(cString: strerror(errno)))") }
        left -= n
    }
}

/// The upload row's media: half the bytes in ~300 KB photos (290–310 KB), half in 50 MB videos
/// (at least one), in `directory`.
func makeMedia(in directory: String, totalBytes: Int) throws -> [MediaFile] {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let videoSize = 50_000_000
    let videos = max(1, (totalBytes / 2) / videoSize)
    var rng = SplitMix64(seed: 0xA55E7)
    var photos: [MediaFile] = []
    var photoBytes = totalBytes - videos * videoSize
    while photoBytes > 0 {
        let size = min(photoBytes, rng.inRange(290_000...310_000))
        photos.append(MediaFile(path: directory + "/photo-\(photos.count).jpg", size: size, mediaType: "image/jpeg"))
        photoBytes -= size
    }
    // The videos spread among the photos, as in a camera roll.
    var mixed: [MediaFile] = []
    let every = max(1, photos.count / (videos + 1))
    var video = 0
    for (i, photo) in photos.enumerated() {
        if i > 0 && i % every == 0 && video < videos {
            mixed.append(MediaFile(path: directory + "/video-\(video).mp4", size: videoSize, mediaType: "video/mp4"))
            video += 1
        }
        mixed.append(photo)
    }
    for v in video..<videos {
        mixed.append(MediaFile(path: directory + "/video-\(v).mp4", size: videoSize, mediaType: "video/mp4"))
    }
    for (i, file) in mixed.enumerated() { try writeRandomFile(file.path, size: file.size, seed: 1000 + UInt64(i)) }
    return mixed
}

/// Writes back every dirty page on the machine (`sync(2)`), so that a timed phase does not share
/// the disk with the write-back of what was written before it (the media just made, the big
/// row's 15 GiB, the previous side's store). Without it, one run measured the same import at
/// 45 MB/s right after the big row and at 163 MB/s a minute later.
func settle() {
    #if canImport(Glibc)
    Glibc.sync()
    #endif
}

/// The baseline: copies every file into `directory` in 1 MiB reads and writes, fsync at the end
/// of each file (the disk's rate for durably storing the same bytes). Returns the wall time.
func fsyncWrite(_ files: [MediaFile], into directory: String) throws -> UInt64 {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: mebibyte, alignment: 8)
    defer { buffer.deallocate() }
    let start = monotonicNanos()
    for (i, file) in files.enumerated() {
        let source = open(file.path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { throw BenchError("open \(file.path): \(String(cString: strerror(errno)))") }
        defer { close(source) }
        let target = directory + "/copy-\(i)"
        let fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw BenchError("open \(target): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while true {
            let n = read(source, buffer.baseAddress, mebibyte)
            guard n >= 0 else { throw BenchError("read \(file.path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            guard write(fd, buffer.baseAddress, n) == n else { throw BenchError("write \(target): \(String(cString: strerror(errno)))") }
        }
        guard fsync(fd) == 0 else { throw BenchError("fsync \(target): \(String(cString: strerror(errno)))") }
    }
    return monotonicNanos() - start
}

// MARK: What the engine sends

/// Wraps a transport and times the asset upload phase: from the first `beginAssetUpload` until
/// the last chunk's answer.
final class AssetTimingTransport: SyncTransport {
    struct Seen: Sendable {
        var firstUploadStart: UInt64 = 0
        var lastUploadEnd: UInt64 = 0
        var uploads = 0
        var chunks = 0
        var chunkBytes = 0
        var chunkNanos: UInt64 = 0
        var pushes = 0
        var pushedTransactions = 0
    }

    let inner: any SyncTransport
    private let state = Mutex(Seen())
    var seen: Seen { state.withLock { $0 } }

    init(_ inner: any SyncTransport) { self.inner = inner }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo {
        try await inner.ensureZone(zone, create: create)
    }
    func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        try await inner.ensureZone(zone, create: create, continuing: continuing)
    }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer {
        let answer = try await inner.push(zone: zone, transactions: transactions)
        state.withLock { $0.pushes += 1; $0.pushedTransactions += transactions.count }
        return answer
    }
    func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer {
        let answer = try await inner.push(zone: zone, transactions: transactions, epoch: epoch)
        state.withLock { $0.pushes += 1; $0.pushedTransactions += transactions.count }
        return answer
    }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        try await inner.pull(zone: zone, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await inner.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await inner.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await inner.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
    func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        let start = monotonicNanos()
        state.withLock { if $0.firstUploadStart == 0 { $0.firstUploadStart = start } }
        let answer = try await inner.beginAssetUpload(zone: zone, manifest: manifest)
        let end = monotonicNanos()
        state.withLock { $0.uploads += 1; $0.lastUploadEnd = end }
        return answer
    }
    func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        let start = monotonicNanos()
        let answer = try await inner.putAssetChunk(zone: zone, asset: asset, index: index, bytes: bytes)
        let end = monotonicNanos()
        state.withLock {
            $0.chunks += 1
            $0.chunkBytes += bytes.count
            $0.chunkNanos += end - start
            $0.lastUploadEnd = end
        }
        return answer
    }
    func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? {
        try await inner.assetManifest(zone: zone, asset: asset)
    }
    func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        try await inner.assetChunk(zone: zone, asset: asset, index: index)
    }
}

/// The HTTP client under `HTTPSyncTransport`: the default (FoundationNetworking's `URLSession`
/// on Linux) or AsyncHTTPClient; each talks to the server as its own user.
enum Exchange: String, CaseIterable {
    case urlSession = "URLSession"
    case asyncHTTPClient = "AsyncHTTPClient"

    var user: String { self == .urlSession ? "bench" : "bench-ahc" }
    var token: String { "secret-" + user }

    func transport(_ server: ServerProcess) -> HTTPSyncTransport {
        switch self {
        case .urlSession: HTTPSyncTransport(server: server.url, bearer: token)
        case .asyncHTTPClient: HTTPSyncTransport(server: server.url, bearer: token, client: HTTPSyncTransport.defaultClient)
        }
    }
}

func engine(_ store: Store, _ server: ServerProcess, zone: String, _ exchange: Exchange) throws -> (SyncEngine, AssetTimingTransport) {
    let timing = AssetTimingTransport(exchange.transport(server))
    return (try SyncEngine(store: store, transport: timing, zone: zone), timing)
}

/// Inserts one note per asset (`nil`: a note without a photo), 100 to a transaction.
func insertNotes(into store: Store, photos: [Asset?]) async throws {
    var done = 0
    while done < photos.count {
        let range = done..<min(photos.count, done + 100)
        try await store.transaction { tx in
            for i in range {
                var values = noteValues(i)
                if let photo = photos[i] { values["photo"] = .asset(photo) }
                _ = try tx.insert("Note", values)
            }
        }
        done = range.upperBound
    }
}

// MARK: 1. Upload throughput

struct UploadRun {
    struct Side {
        var exchange: Exchange
        var importNanos: UInt64 = 0
        var importCPU = 0.0
        /// First `beginAssetUpload` → last chunk answered.
        var uploadNanos: UInt64 = 0
        var syncNanos: UInt64 = 0
        var seen = AssetTimingTransport.Seen()
        var clientCPU = 0.0
        var serverCPU = 0.0
    }
    var files = 0
    var videos = 0
    var bytes = 0
    var fsyncNanos: UInt64 = 0
    var sides: [Side] = []
}

func uploadRun(_ place: DataPlace, server: ServerProcess, totalBytes: Int, exchanges: [Exchange]) async throws -> UploadRun {
    var run = UploadRun()
    note("upload: writing \(bytes(Double(totalBytes))) of media (photos ~300 KB, videos 50 MB)…")
    let files = try makeMedia(in: place.path("media"), totalBytes: totalBytes)
    run.files = files.count
    run.videos = files.filter { $0.mediaType == "video/mp4" }.count
    run.bytes = files.reduce(0) { $0 + $1.size }
    settle()

    note("  baseline: copying them with 1 MiB writes, fsync per file…")
    run.fsyncNanos = try fsyncWrite(files, into: place.path("fsync-copy"))
    try? FileManager.default.removeItem(atPath: place.path("fsync-copy"))

    for exchange in exchanges {
        var side = UploadRun.Side(exchange: exchange)
        let path = place.path("uploader-\(exchange.user)")
        let store = try await openStore(path)
        settle()
        note("  import: \(grouped(files.count)) files into a store…")
        var assets: [Asset?] = []
        let importCPU = processCPUSeconds()
        var start = monotonicNanos()
        for file in files {
            let name = String(file.path.split(separator: "/").last ?? "media")
            assets.append(try await store.importAsset(contentsOf: URL(fileURLWithPath: file.path), mediaType: file.mediaType, fileName: name))
        }
        side.importNanos = monotonicNanos() - start
        side.importCPU = processCPUSeconds() - importCPU
        try await insertNotes(into: store, photos: assets)

        note("  sync over \(exchange.rawValue): uploading to the server…")
        let (engine, timing) = try engine(store, server, zone: "upload", exchange)
        let clientBefore = processCPUSeconds()
        let serverBefore = server.cpuSeconds()
        start = monotonicNanos()
        let report = try await engine.sync()
        side.syncNanos = monotonicNanos() - start
        side.clientCPU = processCPUSeconds() - clientBefore
        side.serverCPU = server.cpuSeconds() - serverBefore
        side.seen = timing.seen
        side.uploadNanos = side.seen.lastUploadEnd - side.seen.firstUploadStart
        try await store.close()
        try? FileManager.default.removeItem(atPath: path)
        guard side.seen.uploads == files.count, side.seen.chunkBytes == run.bytes, report.pushedTransactions > 0 else {
            throw BenchError("the sync over \(exchange.rawValue) uploaded \(side.seen.uploads) assets (\(side.seen.chunkBytes) bytes) and pushed \(report.pushedTransactions) tx; expected \(files.count) assets of \(run.bytes) bytes")
        }
        note("    import \(fixed(Double(run.bytes) / 1e6 / seconds(side.importNanos), 0)) MB/s, upload \(fixed(Double(run.bytes) / 1e6 / seconds(side.uploadNanos), 0)) MB/s")
        run.sides.append(side)
    }
    try? FileManager.default.removeItem(atPath: place.path("media"))
    return run
}

// MARK: 2. Memory of one big asset

struct BigRun {
    var size = 0
    var importNanos: UInt64 = 0
    var uploadNanos: UInt64 = 0
    var clientImportBaseline = 0
    var clientImportPeak = 0
    var clientUploadBaseline = 0
    var clientUploadPeak = 0
    var serverBaseline = 0
    var serverUploadPeak = 0
    var peaksReset = true
}

/// One asset of `size` bytes: imported, then uploaded to a fresh server child. Memory is this
/// process's and the server's VmRSS before each phase and VmHWM after it (reset in between).
func bigRun(_ place: DataPlace, size: Int, exchange: Exchange) async throws -> BigRun {
    var run = BigRun(size: size)
    let media = place.path("big-media")
    try FileManager.default.createDirectory(atPath: media, withIntermediateDirectories: true)
    note("big asset: writing \(bytes(Double(size))) of media…")
    try writeRandomFile(media + "/big.mp4", size: size, seed: 0xB16)
    settle()
    let server = try ServerProcess.start(data: place.path("big-server"), directory: place.run)
    defer { server.stop() }
    note("  server: pid \(server.pid) on \(server.url.absoluteString)")
    let store = try await openStore(place.path("big-store"))

    run.clientImportBaseline = residentMemory().rss
    run.peaksReset = resetPeakMemory() && resetPeakMemory(pid: server.pid)
    note("  import…")
    var start = monotonicNanos()
    let asset = try await store.importAsset(contentsOf: URL(fileURLWithPath: media + "/big.mp4"), mediaType: "video/mp4", fileName: "big.mp4")
    run.importNanos = monotonicNanos() - start
    run.clientImportPeak = residentMemory().peak
    try FileManager.default.removeItem(atPath: media)
    try await insertNotes(into: store, photos: [asset])

    let (engine, timing) = try engine(store, server, zone: "big", exchange)
    run.serverBaseline = residentMemory(pid: server.pid).rss
    run.clientUploadBaseline = residentMemory().rss
    run.peaksReset = run.peaksReset && resetPeakMemory() && resetPeakMemory(pid: server.pid)
    note("  upload…")
    start = monotonicNanos()
    _ = try await engine.sync()
    run.uploadNanos = timing.seen.lastUploadEnd - timing.seen.firstUploadStart
    run.clientUploadPeak = residentMemory().peak
    run.serverUploadPeak = residentMemory(pid: server.pid).peak
    try await store.close()
    guard timing.seen.chunkBytes == size else {
        throw BenchError("the big upload sent \(timing.seen.chunkBytes) bytes, expected \(size)")
    }
    try? FileManager.default.removeItem(atPath: place.path("big-store"))
    try? FileManager.default.removeItem(atPath: place.path("big-server"))
    return run
}

// MARK: 3. Lazy fetch latency

struct FetchRun {
    var latencies: [UInt64] = []
    var manifestNanos: [UInt64] = []
    var chunkNanos: [UInt64] = []
}

/// Wraps a transport and times the fetch requests.
final class FetchTimingTransport: SyncTransport {
    let inner: any SyncTransport
    let timings = Mutex((manifest: [UInt64](), chunk: [UInt64]()))
    init(_ inner: any SyncTransport) { self.inner = inner }

    func ensureZone(_ zone: ZoneReference, create: Bool) async throws -> ZoneAccessInfo { try await inner.ensureZone(zone, create: create) }
    func ensureZone(_ zone: ZoneReference, create: Bool, continuing: UInt64?) async throws -> ZoneAccessInfo {
        try await inner.ensureZone(zone, create: create, continuing: continuing)
    }
    func push(zone: ZoneReference, transactions: [[UInt8]]) async throws -> PushAnswer { try await inner.push(zone: zone, transactions: transactions) }
    func push(zone: ZoneReference, transactions: [[UInt8]], epoch: UInt64?) async throws -> PushAnswer {
        try await inner.push(zone: zone, transactions: transactions, epoch: epoch)
    }
    func pull(zone: ZoneReference, after token: String?, limit: Int, wait: Duration?) async throws -> PullResult {
        try await inner.pull(zone: zone, after: token, limit: limit, wait: wait)
    }
    func snapshot(zone: ZoneReference) async throws -> ZoneSnapshotPayload? { try await inner.snapshot(zone: zone) }
    func replicas(zone: ZoneReference) async throws -> [ReplicaAuthor] { try await inner.replicas(zone: zone) }
    func uploadState(zone: ZoneReference, state: [UInt8], replica: ReplicaID?, claim: UInt64, after token: String?) async throws -> StateUploadResult {
        try await inner.uploadState(zone: zone, state: state, replica: replica, claim: claim, after: token)
    }
    func beginAssetUpload(zone: ZoneReference, manifest: AssetManifest) async throws -> AssetUploadAnswer {
        try await inner.beginAssetUpload(zone: zone, manifest: manifest)
    }
    func putAssetChunk(zone: ZoneReference, asset: AssetHash, index: Int, bytes: [UInt8]) async throws -> AssetUploadAnswer {
        try await inner.putAssetChunk(zone: zone, asset: asset, index: index, bytes: bytes)
    }
    func assetManifest(zone: ZoneReference, asset: AssetHash) async throws -> AssetManifest? {
        let start = monotonicNanos()
        let manifest = try await inner.assetManifest(zone: zone, asset: asset)
        let elapsed = monotonicNanos() - start
        timings.withLock { $0.manifest.append(elapsed) }
        return manifest
    }
    func assetChunk(zone: ZoneReference, asset: AssetHash, index: Int) async throws -> [UInt8] {
        let start = monotonicNanos()
        let bytes = try await inner.assetChunk(zone: zone, asset: asset, index: index)
        let elapsed = monotonicNanos() - start
        timings.withLock { $0.chunk.append(elapsed) }
        return bytes
    }
}

/// A device uploads `count` distinct 1 MiB assets on notes; a fresh device syncs the notes and
/// fetches each asset once with `store.asset(_:)`, timed from the call until the file is there.
func fetchRun(_ place: DataPlace, server: ServerProcess, count: Int, exchange: Exchange, backend: String) async throws -> FetchRun {
    note("fetch over \(exchange.rawValue): uploading \(count) assets of 1 MiB…")
    let source = try await openStore(place.path("fetch-source-\(exchange.user)-\(backend)"))
    var assets: [Asset] = []
    for i in 0..<count {
        assets.append(try await source.importAsset(Data(randomBytes(mebibyte, seed: 0xF37C_0000 + UInt64(i))), mediaType: "image/jpeg", fileName: "photo-\(i).jpg"))
    }
    try await insertNotes(into: source, photos: assets)
    let (sourceEngine, _) = try engine(source, server, zone: "fetch", exchange)
    _ = try await sourceEngine.sync()
    try await source.close()

    note("  a fresh device syncs the notes and fetches each asset once…")
    let device = try await openStore(place.path("fetch-device-\(exchange.user)-\(backend)"))
    let timing = FetchTimingTransport(exchange.transport(server))
    let deviceEngine = try SyncEngine(store: device, transport: timing, zone: "fetch")
    let report = try await deviceEngine.sync()
    guard device.count("Note") == count else {
        throw BenchError("the fresh device holds \(device.count("Note")) notes after pulling \(report.appliedEvents) events, expected \(count)")
    }
    var run = FetchRun()
    for asset in assets {
        guard device.localFile(for: asset) == nil else { throw BenchError("the fresh device already holds \(asset)") }
        let start = monotonicNanos()
        let file = try await device.asset(asset)
        run.latencies.append(monotonicNanos() - start)
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue
        guard size == mebibyte else { throw BenchError("fetched \(asset) into \(file.path) of \(size.map(String.init) ?? "no") bytes") }
    }
    withExtendedLifetime(deviceEngine) {}
    try await device.close()
    (run.manifestNanos, run.chunkNanos) = timing.timings.withLock { ($0.manifest, $0.chunk) }
    return run
}

// MARK: 4. A store with 10,000 photos

/// What the open child measured.
struct OpenProbe: Codable {
    var openSeconds: Double
    var count: Int
    var rssBeforeOpen: Int
    var rssAfterOpen: Int
    var peakRSS: Int
}

enum OpenChild {
    /// The child's `main`: opens the store, counts the notes, prints one JSON line, exits.
    static func run(_ path: String) async -> Never {
        do {
            let before = residentMemory()
            let start = monotonicNanos()
            let store = try await openStore(path)
            let opened = monotonicNanos()
            let after = residentMemory()
            let probe = OpenProbe(openSeconds: seconds(opened - start), count: store.count("Note"),
                                  rssBeforeOpen: before.rss, rssAfterOpen: after.rss, peakRSS: residentMemory().peak)
            try await store.close()
            print(String(decoding: try JSONEncoder().encode(probe), as: UTF8.self))
            exit(0)
        } catch {
            fail("open-child \(path): \(error)", status: 1)
        }
    }
}

struct PhotoStoreRun {
    var photos = 0
    var photoBytes = 0
    var buildNanos: UInt64 = 0
    var withPhotos: [OpenProbe] = []
    var without: [OpenProbe] = []
    var diskWith = 0
    var diskWithout = 0

    static func median(_ probes: [OpenProbe], _ value: (OpenProbe) -> Double) -> Double {
        let sorted = probes.map(value).sorted()
        return sorted[sorted.count / 2]
    }
}

/// Two stores with the same `photos` notes, one with a `photoSize` photo on each; each opened in
/// fresh processes `runs` times, interleaved.
func photoStoreRun(_ place: DataPlace, photos: Int, photoSize: Int, runs: Int) async throws -> PhotoStoreRun {
    var run = PhotoStoreRun(photos: photos, photoBytes: photoSize)
    note("photo store: \(grouped(photos)) notes with a \(bytes(Double(photoSize))) photo each, and the same notes without…")
    let withPath = place.path("photos")
    let withoutPath = place.path("no-photos")
    let store = try await openStore(withPath)
    let start = monotonicNanos()
    var assets: [Asset?] = []
    for i in 0..<photos {
        assets.append(try await store.importAsset(Data(randomBytes(photoSize, seed: 0x9407_0000 + UInt64(i))), mediaType: "image/jpeg", fileName: "IMG_\(i).jpg"))
    }
    try await insertNotes(into: store, photos: assets)
    run.buildNanos = monotonicNanos() - start
    try await store.close()
    let plain = try await openStore(withoutPath)
    try await insertNotes(into: plain, photos: Array(repeating: nil, count: photos))
    try await plain.close()
    run.diskWith = Machine.directorySize(withPath)
    run.diskWithout = Machine.directorySize(withoutPath)

    note("  opening each in a fresh process, \(runs)×…")
    for _ in 0..<runs {
        for (path, isWith) in [(withPath, true), (withoutPath, false)] {
            let probe = try ChildRun.json(OpenProbe.self, arguments: ["--open-child", path]).value
            guard probe.count == photos else { throw BenchError("\(path) opened with \(probe.count) notes, expected \(photos)") }
            if isWith { run.withPhotos.append(probe) } else { run.without.append(probe) }
        }
    }
    return run
}
