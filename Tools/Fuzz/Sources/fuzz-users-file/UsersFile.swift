// The server's users file (`--users`) as `strata serve` loads it: JSON of salted token digests
// (`strata users add`) or the older plain digests, then checked (names, hex, duplicates).
import Foundation
import FuzzSupport
@testable import StrataServer

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        // Files as `strata users add` writes them (into a scratch directory), and an older one.
        let path = NSTemporaryDirectory() + "/strata-fuzz-users-\(ProcessInfo.processInfo.processIdentifier).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var seeds: [[UInt8]] = []
        do {
            _ = try UsersFile.add("alice", to: path)
            seeds.append(try FuzzSeeds.contents(path))
            _ = try UsersFile.add("bob", to: path)
            seeds.append(try FuzzSeeds.contents(path))
        } catch {
            throw SeedError(message: "cannot write a users file at \(path): \(error)")
        }
        seeds.append(Array(#"{"users":[{"name":"carol","tokenSHA256":"\#(UserDirectory.digest(of: "secret"))"}]}"#.utf8))
        seeds.append(Array(#"{"users":[]}"#.utf8))
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let directory = try? UserDirectory.parse(Data(fuzzBytes(data, size)), path: "fuzz/users.json") else { return 0 }
    _ = directory.authenticate(bearer: "strata_0123456789abcdef_secret")
    return 0
}
