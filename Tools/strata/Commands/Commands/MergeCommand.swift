import ArgumentParser
import Foundation

/// `strata merge STORE_A STORE_B --what-if`: what merging two stores would produce, and why,
/// writing neither. Stores merge for real by syncing through a log server; this command only
/// previews it, so `--what-if` is required (a merge that wrote would be a second way to merge,
/// next to sync, that could disagree with it).
struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Preview merging two stores (--what-if): the merged state, which side each differing field comes from, and the rule that decided.",
        discussion: """
        Neither store is written. The merged state is what both stores would hold once they have synced with each other through a log server (the merge rule: last writer wins per field by hybrid logical clock, then replica ID; an object exists while its newest insert is newer than its newest delete; to-many members are add-wins sets). Local-only attributes never sync and are not compared.
        """
    )

    @Argument(help: "The first store (A).")
    var storeA: String

    @Argument(help: "The second store (B).")
    var storeB: String

    @Flag(help: "Show what the merge would produce without writing either store (required: stores merge for real by syncing).")
    var whatIf = false

    @Option(help: "List at most this many differing objects.")
    var limit: Int = 1000

    @OptionGroup var output: JSONFlag
    var json: Bool { output.json }

    func validate() throws {
        guard whatIf else {
            throw ValidationError("merge only previews: add --what-if (stores merge for real by syncing through a log server: `strata sync`)")
        }
        if limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let a = try StoreFiles(storeA)
        let b = try StoreFiles(storeB)
        let progress = Progress("merge", total: a.segmentBytes() + b.segmentBytes())
        let preview = try MergeWhatIf.run(storeA, storeB, limit: limit, progress: progress)
        print(json ? try JSONOutput.string(preview) : preview.text)
    }
}
