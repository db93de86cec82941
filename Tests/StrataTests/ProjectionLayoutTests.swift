@testable import StrataCore
import Testing

/// The projection holds a register per field of every object: its record layout is what an
/// app's memory grows by per object (issue 27's goal: 100,000 four-attribute objects with one
/// index in at most 400 bytes each). A payload added to `Value` unboxed once made every field
/// 96 bytes instead of 40 (the 72-byte asset reference); these sizes say so at once.
@Suite("Projection record layout")
struct ProjectionLayoutTests {
    @Test("a value is at most 17 bytes (an asset reference is boxed), a field register 40, an object record 56")
    func sizes() {
        #expect(MemoryLayout<Value>.size <= 17)
        #expect(MemoryLayout<FieldSlot>.stride == 40)
        #expect(MemoryLayout<ObjectRecord>.stride == 56)
    }
}
