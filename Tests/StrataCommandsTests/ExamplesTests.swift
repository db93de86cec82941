import Foundation
import StrataTestSupport
import Testing

/// The examples under Examples/ are built with the package and run here, so that what the
/// documentation shows keeps working.
@Suite("Examples")
struct ExamplesTests {
    @Test("Examples/Notes (the getting-started walk-through): the observed list follows local and synced commits, and both devices converge")
    func notesExample() throws {
        let run = try ChildProcess.run(try ChildProcess.executable("strata-example-notes"), [])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == """
        laptop, to do: []
        laptop, to do: ["Buy milk", "Call Ann"]
        laptop, to do: ["Call Ann"]
        phone, done: ["Buy milk"]
        converged: true

        """, "\(run.stdout)")
    }
}
