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
    /// ``SyncReport/stateCheck`` `nil` (logged), and the next report is due as after a success
    /// (an older server is not asked again at every sync).
    func reportState(_ report: inout SyncReport) async {
        guard let interval = options.stateReportInterval, let token = cursor.token, !Task.isCancelled else { return }
        let store = self.store
        // What the state is at: the zone's token and the store's own log (a local commit, or
        // events applied from elsewhere, move it). Unchanged since the last report: nothing new
        // to say, and no digest to compute.
        let logEnd = store.segmentLog.endPosition
        if let last = lastStateReport {
            guard last.token != token || last.logEnd != logEnd, last.at.duration(to: .now) >= interval else { return }
        }
        let acknowledged = cursor.acknowledged
        do {
            let unpushed = try await unpushedEdits()
            let masked = !options.downloadMask.isEmpty
            // A state the server would not compare (ahead of the zone, or part of it) is not
            // digested: the report still says where the device is and what it has not pushed.
            // On a view of the state, not under the store's lock: commits go on while it is
            // computed (a million objects take seconds).
            let digest = unpushed.isEmpty && !masked ? try await BlockingIO.run { store.read { $0.digest() } } : nil
            // The state must be the one at `token`: a pull, a push or a commit meanwhile (another
            // call on this engine while it waited) makes the digest another state's. Sent later.
            guard cursor.token == token, cursor.acknowledged == acknowledged, store.segmentLog.endPosition == logEnd else { return }
            let pendingAssets = unpushed.isEmpty ? 0 : Self.assetsNamed(byTransactions: try await self.unpushed().map(\.bytes)).count
            let claim = DeviceReport(replica: store.replicaID.description, token: token, digest: digest,
                                     pendingTransactions: UInt64(unpushed.count), pendingAssets: UInt64(pendingAssets), masked: masked)
            lastStateReport = (token, logEnd, .now)
            let verdict = try await transport.reportDevice(zoneReference, claim)
            report.stateCheck = verdict
            if verdict.check == .divergent {
                options.logger.error("this store's state differs from the zone's at the same point of its history: strata diff STORE --server URL --zone Z names where", metadata: [
                    "zone": "\(zoneReference)", "position": "\(verdict.position)", "digest": "\(digest ?? "")",
                    "zoneDigest": "\(verdict.zoneDigest ?? "")", "store": "\(store.directory)",
                ])
            }
        } catch {
            options.logger.notice("the state report was not sent (the sync itself is done)", metadata: ["zone": "\(zoneReference)", "error": "\(error)"])
        }
    }
}
