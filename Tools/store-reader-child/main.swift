// The reader of the multi-process test (Tests/StrataTests/StoreReaderTests.swift): opens a store
// that the test process holds for writing, follows its commits with StoreReader.refresh(), and
// prints a line whenever the number of notes it sees changes:
//
//     count <n>
//
// then, once it sees TARGET notes, `digest <hex>` and exits 0 (1 after 180 s without them: the
// writer's commits wait on fsync, which a loaded machine can make slow).
import Foundation
import Strata
import StrataCore

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let target = Int(arguments[2]) else {
    emit("usage: store-reader-child STORE TARGET")
    exit(2)
}
let deadline = Date().addingTimeInterval(180)
do {
    let reader = try StoreReader.open(at: arguments[1])
    var seen = -1
    while Date() < deadline {
        try reader.refresh()
        let count = reader.read { $0.count("Note") }
        if count != seen {
            emit("count \(count)")
            seen = count
        }
        if count >= target {
            emit("digest \(reader.digest())")
            exit(0)
        }
        usleep(2_000)
    }
    emit("timeout at \(seen) notes")
    exit(1)
} catch {
    emit("error \(error)")
    exit(1)
}
