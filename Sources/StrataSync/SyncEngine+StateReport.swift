import Foundation
import Logging
@_spi(StrataInternals) import Strata
import StrataCore
import StrataLog
import StrataProtocol

/// The state report after a sync (``SyncOptions/stateReportInterval``): the digest of the store's
/// state at its token, sent to the zone's device registry, so that the server notices a device
/// holding a state the zone never had.
extension SyncEngine {
    /// Sends the report when one is due, and records the server's answer in `report`. A report
    /// never fails the sync: a server without a registry, a network error or a refusal leaves
    /// ``SyncReport/stateCheck`` `nil` (logged), and the next sync tries again.
    func reportState(_ report: inout SyncReport) async {
        guard let interval = options.stateReportInterval, let token = cursor.token else { return }
        let store = self.store
        // What the state is at: the zone's token and the store's own log (a local commit, or
        // events applied from elsewhere, move it). Unchanged since the last report: nothing new
        // to say, and no digest to compute.
        let logEnd = store.segmentLog.endPosition
        if let last = lastStateReport {
            guard last.token != token || last.logEnd != logEnd, last.at.duration(to: .now) >= interval else { return }
        }
        do {
            // The digest first, then what is unpushed: an edit committed in between is counted
            // as pending (the server then does not compare), never missing from a compared state.
            let digest = try await BlockingIO.run { store.digest() }
            let unpushed = try await unpushedEdits()
            let pendingAssets = unpushed.isEmpty ? 0 : Self.assetsNamed(byTransactions: try await self.unpushed().map(\.bytes)).count
            let claim = DeviceReport(replica: store.replicaID.description, token: token, digest: digest,
                                     pendingTransactions: UInt64(unpushed.count), pendingAssets: UInt64(pendingAssets),
                                     masked: !options.downloadMask.isEmpty)
            let verdict = try await transport.reportDevice(zoneReference, claim)
            lastStateReport = (token, logEnd, .now)
            report.stateCheck = verdict
            if verdict.check == .divergent {
                options.logger.error("this store's state differs from the zone's at the same point of its history", metadata: [
                    "zone": "\(zoneReference)", "position": "\(verdict.position)", "digest": "\(digest)",
                    "zoneDigest": "\(verdict.zoneDigest ?? "")", "store": "\(store.directory)",
                ])
            }
        } catch {
            options.logger.debug("the state report was not sent", metadata: ["zone": "\(zoneReference)", "error": "\(error)"])
        }
    }
}
