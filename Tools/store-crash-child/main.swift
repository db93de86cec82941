// The child of the store crash test (Tests/StrataTests/StoreCrashTests.swift): commits
// transactions of N notes each (group commit, several tasks at once) and prints one line per
// acknowledged commit until it is killed with SIGKILL:
//
//     ack <batch> <count>
//
// Every note of batch B of N notes has title "b<B>n<N>"; the parent checks each batch is wholly
// present or wholly absent, and present whenever it was acknowledged.
import Strata

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
import StrataCore
#endif

func emit(_ line: String) {
    _ = line.withCString { write(1, $0, strlen($0)) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let prefix = Int(arguments[2]) else {
    emit("usage: store-crash-child STORE PREFIX\n")
    exit(2)
}
let schema = Schema {
    Entity("Note", attributes: [Attribute("title", .string, optional: false), Attribute("index", .integer)])
}
do {
    let store = try await Store.open(at: arguments[1], schema: schema, options: StoreOptions(durability: .groupCommit))
    emit("ready\n")
    try await withThrowingTaskGroup(of: Void.self) { group in
        for writer in 0..<4 {
            group.addTask {
                var n = 0
                while true {
                    let batch = prefix * 1_000_000 + writer * 10_000 + n
                    let count = 1 + n % 5
                    try await store.transaction { tx in
                        for i in 0..<count { try tx.insert("Note", ["title": .string("b\(batch)n\(count)"), "index": .integer(Int64(i))]) }
                    }
                    emit("ack \(batch) \(count)\n")
                    n += 1
                }
            }
        }
        try await group.waitForAll()
    }
} catch {
    emit("error \(error)\n")
    exit(1)
}
