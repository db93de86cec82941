/// A harness's command line, read flag by flag: each flag's value is taken and checked here, and
/// every mistake ends the run with the message and the usage (status 2).
public struct Arguments {
    private var rest: ArraySlice<String>
    public let usage: String

    public init(usage: String, _ arguments: [String] = CommandLine.arguments) {
        rest = arguments.dropFirst()
        self.usage = usage
    }

    /// The next flag, or `nil` at the end.
    public mutating func next() -> String? { rest.popFirst() }

    /// The value after `flag` (a path, a name).
    public mutating func value(of flag: String, _ what: String = "a value") -> String {
        guard let value = rest.popFirst() else { wrong("\(flag) needs \(what)") }
        return value
    }

    /// A whole number after `flag`, at least `minimum`.
    public mutating func number(of flag: String, atLeast minimum: Int = 1) -> Int {
        guard let value = rest.popFirst().flatMap({ Int($0) }), value >= minimum else {
            wrong("\(flag) needs a number of at least \(minimum)")
        }
        return value
    }

    /// Comma-separated whole numbers after `flag`, each at least 1.
    public mutating func numbers(of flag: String) -> [Int] {
        let list = (rest.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
        guard !list.isEmpty, list.allSatisfy({ $0 > 0 }) else { wrong("\(flag) needs positive numbers, comma-separated") }
        return list
    }

    /// Comma-separated names after `flag`, each one of `allowed`.
    public mutating func names(of flag: String, from allowed: Set<String>) -> Set<String> {
        let names = Set(value(of: flag, "a list").split(separator: ",").map(String.init))
        guard !names.isEmpty, names.isSubset(of: allowed) else {
            wrong("\(flag) takes names from \(allowed.sorted().joined(separator: ","))")
        }
        return names
    }

    /// Ends the run: a usage error.
    public func wrong(_ message: String) -> Never { fail(message + "\n\n" + usage, status: 2) }
}

/// The whole life of a harness whose only flags are `--quick`, `--dir PATH` and `--keep`: reads
/// them, makes the data place (removed at the end unless `--keep`), runs `body`, and ends the
/// process with the error when it throws.
public func runQuickHarness(_ name: String, _ body: @Sendable (DataPlace, _ quick: Bool) async throws -> Void) async {
    var arguments = Arguments(usage: "usage: \(name) [--quick] [--dir PATH] [--keep]")
    var quick = false, keep = false
    var parent: String?
    while let argument = arguments.next() {
        switch argument {
        case "--quick": quick = true
        case "--keep": keep = true
        case "--dir": parent = arguments.value(of: "--dir", "a directory")
        default: arguments.wrong("unknown argument \(argument)")
        }
    }
    do {
        let place = try DataPlace.make(parent: parent, prefix: name)
        defer { if !keep { place.remove() } }
        try await body(place, quick)
    } catch {
        fail("\(name): \(error)", status: 1)
    }
}
