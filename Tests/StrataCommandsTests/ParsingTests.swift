import ArgumentParser
@testable import StrataCommands
import Testing
import StrataCore

/// Every command parses what its help promises and refuses what it cannot use.
@Suite("Command parsing")
struct ParsingTests {
    func parse<T: ParsableCommand>(_ arguments: [String], as type: T.Type) throws -> T {
        let command = try StrataCLI.parseAsRoot(arguments)
        return try #require(command as? T, "\(arguments) parsed as \(Swift.type(of: command))")
    }

    @Test func demo() throws {
        #expect(try parse(["demo"], as: DemoCommand.self).keep == nil)
        #expect(try parse(["demo", "--keep", "/tmp/x"], as: DemoCommand.self).keep == "/tmp/x")
    }

    @Test func initAndApply() throws {
        let initCommand = try parse(["init", "s", "--schema", "schema.json"], as: InitCommand.self)
        #expect(initCommand.store == "s" && initCommand.schema == "schema.json" && !initCommand.json)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["init", "s"]) }
        let apply = try parse(["apply", "s", "changes.jsonl", "--json"], as: ApplyCommand.self)
        #expect(apply.store == "s" && apply.changes == "changes.jsonl" && apply.json)
        #expect(try parse(["apply", "s", "-"], as: ApplyCommand.self).changes == "-")
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["apply", "s"]) }
    }

    @Test func get() throws {
        let all = try parse(["get", "s", "Note"], as: GetCommand.self)
        #expect(all.entity == "Note" && all.id == nil)
        let one = try parse(["get", "s", "Note", "5a0991a6-0000-4000-8000-000000000002", "--json"], as: GetCommand.self)
        #expect(one.id == "5a0991a6-0000-4000-8000-000000000002" && one.json)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["get", "s", "Note", "not-a-uuid"]) }
    }

    @Test func exportCompactInspect() throws {
        #expect(try parse(["export", "s"], as: ExportCommand.self).store == "s")
        #expect(try parse(["compact", "s", "--json"], as: CompactCommand.self).json)
        #expect(try parse(["inspect", "s"], as: InspectCommand.self).store == "s")
        #expect(try parse(["inspect", "s", "--json"], as: InspectCommand.self).json)
    }

    @Test func log() throws {
        let log = try parse(["log", "s", "--from", "3", "--to", "9", "--since", "2026-01-01T00:00:00Z", "--until", "@1767225600000000",
                             "--entity", "Note", "--object", "5a0991a6-0000-4000-8000-000000000002", "--replica", "a1a1",
                             "--kind", "update", "--limit", "5", "--json"], as: LogCommand.self)
        #expect(log.from == 3 && log.to == 9 && log.entity == "Note" && log.replica == "a1a1" && log.kind == "update" && log.limit == 5 && log.json)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["log", "s", "--kind", "rename"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["log", "s", "--since", "yesterday"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["log", "s", "--from", "9", "--to", "3"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["log", "s", "--object", "x"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["log", "s", "--from", "-1"]) }
    }

    @Test func verify() throws {
        let plain = try parse(["verify", "s"], as: VerifyCommand.self)
        #expect(!plain.repair && !plain.yes)
        let repair = try parse(["verify", "s", "--repair", "--yes", "--json"], as: VerifyCommand.self)
        #expect(repair.repair && repair.yes && repair.json)
    }

    @Test func replay() throws {
        let byPosition = try parse(["replay", "s", "--until", "42"], as: ReplayCommand.self)
        #expect(byPosition.until == "42" && Cutoff(argument: "42") == .position(42))
        let byTime = try parse(["replay", "s", "--until", "2026-01-01T10:00:00Z", "--entity", "Note"], as: ReplayCommand.self)
        #expect(byTime.entity == "Note")
        #expect(Cutoff(argument: "2026-01-01T10:00:00Z") == .time(1_767_261_600_000_000))
        #expect(Cutoff(argument: "2026-01-01T10:00:00.250Z") == .time(1_767_261_600_250_000))
        let object = try parse(["replay", "s", "--object", "5a0991a6-0000-4000-8000-000000000002"], as: ReplayCommand.self)
        #expect(object.object != nil && object.until == nil)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["replay", "s", "--until", "soon"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["replay", "s", "--object", "42"]) }
    }

    @Test func diff() throws {
        let diff = try parse(["diff", "a", "b", "--html", "out.html", "--limit", "10"], as: DiffCommand.self)
        #expect(diff.storeA == "a" && diff.storeB == "b" && diff.html == "out.html" && diff.limit == 10)
        #expect(try parse(["diff", "a", "b"], as: DiffCommand.self).limit == 1000)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["diff", "a"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["diff", "a", "b", "--limit", "0"]) }
    }

    @Test func syncAndServe() throws {
        let sync = try parse(["sync", "s", "--server", "http://127.0.0.1:8080", "--zone", "notes", "--token", "t", "--watch"], as: SyncCommand.self)
        #expect(sync.server == "http://127.0.0.1:8080" && sync.zone == "notes" && sync.token == "t" && sync.watch)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["sync", "s", "--server", "ftp://x", "--zone", "z", "--token", "t"]) }
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["sync", "s", "--zone", "z", "--token", "t"]) }
        let serve = try parse(["serve", "--data", "d", "--port", "0", "--users", "u.json", "--retain", "1000", "--compact-every", "60"], as: ServeCommand.self)
        #expect(serve.data == "d" && serve.port == 0 && serve.users == "u.json" && serve.retain == 1000 && serve.compactEvery == 60)
        #expect(throws: (any Error).self) { try StrataCLI.parseAsRoot(["serve", "--data", "d", "--port", "70000"]) }
    }

    @Test("Usage errors exit 2 (the CLI contract), not ArgumentParser's 64; help exits 0")
    func exitCodes() async {
        #expect(await StrataCLI.run(arguments: ["replay", "s", "--until", "soon"]) == 2)
        #expect(await StrataCLI.run(arguments: ["no-such-command"]) == 2)
        #expect(await StrataCLI.run(arguments: ["inspect", "/nonexistent/store"]) == 2)
        #expect(await StrataCLI.run(arguments: ["help"]) == 0)
    }
}
