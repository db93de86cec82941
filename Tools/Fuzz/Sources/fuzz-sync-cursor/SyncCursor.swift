// A sync cursor file (`sync-<zone>.json` in a store's directory) as the engine and the tools read
// it: JSON, then its CRC-32C checked.
import Foundation
import FuzzSupport
import Strata
import StrataCore
@testable import StrataSync

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    FuzzSeeds.writeIfAsked {
        let cursors = [
            SyncCursor(),
            SyncCursor(token: "AQAAAAAAAAABAAAAAAAAAAA", acknowledged: 12, replica: ReplicaID(rawValue: 0xD4D4 << 112 | 4), logID: "32607d0f10ee7fbf678e7be9e82e80cd"),
        ]
        var seeds: [[UInt8]] = []
        for cursor in cursors {
            // The file's layout: the cursor's fields and its checksum (as SyncCursor writes it).
            let fields = try JSONEncoder().encode(cursor)
            guard var object = try JSONSerialization.jsonObject(with: fields) as? [String: Any] else {
                throw SeedError(message: "a cursor does not encode to a JSON object")
            }
            seeds.append(Array(fields))
            object["checksum"] = cursor.checksum
            seeds.append(Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
        }
        return seeds
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    _ = SyncCursor.decode(fuzzBytes(data, size))
    return 0
}
