import Foundation
@_spi(StrataInternals) import Strata
import StrataCore

/// The assets the visible objects of a projection name: each reference, and how many objects
/// name it (an asset is stored once however many objects name it).
struct AssetReferences: Sendable {
    struct Reference: Sendable {
        var asset: Asset
        var objects: Int
    }
    var byHash: [AssetHash: Reference] = [:]

    init(_ projection: ProjectionBuilder) {
        for id in projection.allObjectIDs() {
            guard let object = projection.object(id) else { continue }
            var named = Set<AssetHash>()
            for value in object.values.values {
                if case .asset(let asset) = value, named.insert(asset.sha256).inserted {
                    byHash[asset.sha256, default: Reference(asset: asset, objects: 0)].objects += 1
                }
            }
        }
    }

    /// Whether a schema has an asset attribute (a store without one needs no replay to count assets).
    static func schemaNamesAssets(_ schema: Schema) -> Bool {
        schema.entities.contains { $0.attributes.contains { $0.type == .asset } }
    }
}

/// The asset part of `strata inspect`: counts and bytes of what the store holds, what its
/// objects name but it does not hold (fetched on demand), and downloads in progress.
struct AssetSummary: Codable, Sendable, Hashable {
    struct Tally: Codable, Sendable, Hashable {
        var count = 0
        var bytes: UInt64 = 0
        mutating func add(_ byteCount: UInt64) {
            count += 1
            bytes += byteCount
        }
    }
    /// Distinct assets the visible objects name (`nil` when the objects could not be rebuilt).
    var referenced: Tally?
    /// Complete asset files in `assets/objects/`.
    var held = Tally()
    /// Named by a visible object, not held: fetched when the app (or `strata asset get`) asks.
    var remoteOnly: Tally?
    /// Held, named by no visible object (kept until collected).
    var unreferenced: Tally?
    /// Downloads in progress: `bytes` is what they hold so far.
    var partial = Tally()
    /// Assets pinned for offline use (kept whatever the cache's budget); `bytes` counts their sizes.
    var pinned = Tally()
    /// Held, and no server is known to hold them yet (never evicted: not uploaded, or the upload
    /// not yet confirmed).
    var notUploaded = Tally()

    init(inventory: AssetInventory, references: AssetReferences?) {
        for object in inventory.objects.values { held.add(object.byteCount) }
        for download in inventory.partials.values { partial.add(download.heldBytes) }
        for object in inventory.objects.values where !inventory.knownRemote.contains(object.sha256) { notUploaded.add(object.byteCount) }
        for hash in inventory.pinned {
            pinned.add(inventory.objects[hash]?.byteCount ?? references?.byHash[hash]?.asset.byteCount ?? 0)
        }
        guard let references else { return }
        var referenced = Tally(), remoteOnly = Tally(), unreferenced = Tally()
        for (hash, reference) in references.byHash {
            referenced.add(reference.asset.byteCount)
            // The empty asset is held by every store without a file.
            if inventory.objects[hash] == nil && hash != Asset.empty.sha256 { remoteOnly.add(reference.asset.byteCount) }
        }
        for object in inventory.objects.values where references.byHash[object.sha256] == nil { unreferenced.add(object.byteCount) }
        self.referenced = referenced
        self.remoteOnly = remoteOnly
        self.unreferenced = unreferenced
    }

    var text: String {
        func show(_ tally: Tally) -> String { "\(tally.count) (\(Format.bytes(Int64(clamping: tally.bytes))))" }
        var parts = ["held \(show(held))"]
        if let remoteOnly { parts.append("remote-only \(show(remoteOnly))") }
        parts.append("partial \(partial.count) (\(Format.bytes(Int64(clamping: partial.bytes))) fetched)")
        parts.append("pinned \(show(pinned))")
        parts.append("not uploaded \(show(notUploaded))")
        if let unreferenced, unreferenced.count > 0 { parts.append("unreferenced \(show(unreferenced))") }
        let named = referenced.map { "\($0.count) referenced, " } ?? ""
        return named + parts.joined(separator: ", ")
    }
}

/// What `strata verify` finds in a store's asset directory: one finding per file, typed.
struct AssetFinding: Codable, Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, Codable, Sendable {
        /// The object file's bytes are not the asset its name says (error; repair quarantines it).
        case damagedObject
        /// The object verifies but its manifest is missing, does not decode or names other
        /// chunks (error; repair writes the manifest again from the verified file).
        case damagedManifest
        /// A manifest without its object: an install in progress, or a removed object (warning).
        case manifestWithoutObject
        /// A referenced asset the store does not hold: fetched on demand (info).
        case remoteOnly
        /// A file in the asset folders whose name is no asset's (warning).
        case strayFile
        /// An import a crash interrupted, removed when the store next opens (info).
        case interruptedImport
    }
    enum Severity: String, Codable, Sendable { case error, warning, info }

    var kind: Kind
    var severity: Severity
    var asset: String?
    var file: String?
    var message: String

    var description: String { "\(severity.rawValue): \(message)\(file.map { " (\($0))" } ?? "")" }
}

/// The asset checks of `strata verify`: every object file hashed (streamed, 1 MiB at a time)
/// against its name and its manifest, chunk by chunk; manifests without objects; referenced
/// assets the store does not hold.
struct AssetCheck: Codable, Sendable, Hashable {
    var objectsChecked = 0
    var bytesChecked: UInt64 = 0
    var referenced: Int?
    var findings: [AssetFinding] = []
    /// The manifests computed from verified files whose stored manifest is damaged (not
    /// printed: what a repair writes).
    var rebuiltManifests: [AssetHash: AssetManifest] = [:]

    enum CodingKeys: String, CodingKey { case objectsChecked, bytesChecked, referenced, findings }

    /// - Parameter progress: `true` to show the bytes hashed on a terminal.
    static func run(storeDirectory: String, references: AssetReferences?, progress showProgress: Bool = false) throws -> AssetCheck {
        let inventory: AssetInventory
        do { inventory = try Store.assetInventory(ofStoreAt: storeDirectory) } catch { throw CLIError("\(error)") }
        let progress = showProgress ? Progress("verify assets", total: Int64(clamping: inventory.heldBytes)) : nil
        defer { progress?.finish() }
        var hashed: Int64 = 0
        var check = AssetCheck()
        check.referenced = references?.byHash.count
        for object in inventory.objects.values.sorted(by: { $0.sha256 < $1.sha256 }) {
            check.objectsChecked += 1
            let actual: AssetManifest
            do {
                actual = try Store.hashAssetFile(at: object.path) { piece in
                    hashed += Int64(piece.count)
                    progress?.update(hashed)
                }
            } catch {
                // Gone since the listing: evicted or collected by the process that has the store
                // open (this one only reads it). Not damage.
                guard FileManager.default.fileExists(atPath: object.path) else { check.objectsChecked -= 1; continue }
                check.findings.append(AssetFinding(kind: .damagedObject, severity: .error, asset: object.sha256.hex, file: object.path, message: "cannot read asset \(object.sha256): \(error)"))
                continue
            }
            check.bytesChecked += actual.byteCount
            let stored = Store.readAssetManifest(at: object.manifestPath, of: object.sha256)
            guard actual.sha256 == object.sha256 else {
                var detail = "its \(actual.byteCount) bytes hash to \(actual.sha256)"
                if let stored {
                    if stored.byteCount != actual.byteCount { detail += "; its manifest says \(stored.byteCount) bytes" }
                    let bad = (0..<min(stored.chunks.count, actual.chunks.count)).filter { stored.chunks[$0] != actual.chunks[$0] }
                    if !bad.isEmpty { detail += "; chunk(s) \(bad.prefix(8).map(String.init).joined(separator: ", "))\(bad.count > 8 ? "…" : "") of \(stored.chunks.count) differ from the manifest" }
                }
                check.findings.append(AssetFinding(kind: .damagedObject, severity: .error, asset: object.sha256.hex, file: object.path,
                                                   message: "asset \(object.sha256) is damaged: \(detail) (repair sets it aside; it is fetched again when needed)"))
                continue
            }
            if stored != actual {
                let why = !FileManager.default.fileExists(atPath: object.manifestPath) ? "is missing"
                    : stored == nil ? "does not decode" : "does not match the verified file's chunks"
                check.findings.append(AssetFinding(kind: .damagedManifest, severity: .error, asset: object.sha256.hex, file: object.manifestPath,
                                                   message: "the manifest of asset \(object.sha256) \(why) (the file itself verifies; repair writes the manifest again)"))
                check.rebuiltManifests[object.sha256] = actual
            }
        }
        for (hash, path) in inventory.manifests.sorted(by: { $0.key < $1.key }) where inventory.objects[hash] == nil {
            check.findings.append(AssetFinding(kind: .manifestWithoutObject, severity: .warning, asset: hash.hex, file: path,
                                               message: "a manifest without its asset \(hash) (an install in progress, or an asset set aside)"))
        }
        for path in inventory.strayFiles {
            check.findings.append(AssetFinding(kind: .strayFile, severity: .warning, asset: nil, file: path, message: "a file whose name is no asset's"))
        }
        for path in inventory.temporaryFiles {
            check.findings.append(AssetFinding(kind: .interruptedImport, severity: .info, asset: nil, file: path, message: "an import a crash interrupted (removed when the store next opens)"))
        }
        if let references {
            for (hash, reference) in references.byHash.sorted(by: { $0.key < $1.key })
            where inventory.objects[hash] == nil && hash != Asset.empty.sha256 {
                let partial = inventory.partials[hash].map { ", \(Format.bytes(Int64(clamping: $0.heldBytes))) of it fetched so far" } ?? ""
                check.findings.append(AssetFinding(kind: .remoteOnly, severity: .info, asset: hash.hex, file: nil,
                                                   message: "\(reference.asset) is named by \(reference.objects) object(s) and not held: fetched on demand\(partial)"))
            }
        }
        return check
    }

    var errors: [AssetFinding] { findings.filter { $0.severity == .error } }
}
