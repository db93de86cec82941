import Foundation
import StrataTestSupport
import Testing

/// The tests' real PostgreSQL (PostgreSQL 15 on these machines): the harness the PostgreSQL
/// storage's tests stand on, checked on its own. It fails loudly when it cannot start.
@Suite("A real PostgreSQL cluster for the tests")
struct PostgresClusterTests {
    @Test("a throwaway cluster starts (as nobody when the tests run as root: initdb refuses root), keeps a table's rows over a real connection, and is gone once stopped")
    func throwawayCluster() throws {
        let cluster = try PostgresCluster.start()
        try cluster.psql("CREATE TABLE t (n integer NOT NULL)")
        try cluster.psql("INSERT INTO t VALUES (1), (2), (39)")
        #expect(try cluster.psql("SELECT sum(n) FROM t").trimmingCharacters(in: .whitespacesAndNewlines) == "42")
        #expect(try cluster.psql("SHOW server_version_num").trimmingCharacters(in: .whitespacesAndNewlines).count >= 6)

        let directory = cluster.directory
        cluster.stop()
        #expect(!FileManager.default.fileExists(atPath: directory), "the cluster's files were left behind")
        #expect(throws: PostgresClusterError.self) { try cluster.psql("SELECT 1") }
    }
}
