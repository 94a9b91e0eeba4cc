import PresenceCore
import PresenceRedis

/// Idle leases (docs/scaling.md, "Idle leases"): a namespace this node no longer follows, with
/// nothing waiting and no sessions here, is released after `--release-idle` (RELEASE), so a node
/// that once served thousands of namespaces beats only in those it still serves. It joins again
/// (JOIN, same id) when an effect or a follow needs the namespace; effects wait meanwhile, as
/// while joining, so nothing is ever sent to Redis under a lease this node no longer holds.
extension ClusterLink {
    /// At each beat: start or continue counting the idle time, and release once it is long enough.
    func releaseIfIdle(_ member: ClusterNamespace, lease: NodeLease, now: Int64) {
        guard member.phase == .idle, member.waiting.isEmpty, !member.wantsFollow, !member.reapInFlight, !member.moreToReap,
              !member.snapshots.writing,
              let monitor = member.monitor else {
            member.idleSince = nil
            return
        }
        guard let since = member.idleSince else {
            member.idleSince = now
            return
        }
        guard now - since >= settings.releaseIdleMilliseconds else { return }
        member.leaseReleased()
        lease.release { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(.released):
                    logger.debug("namespace \(member.name): lease released (idle for \(settings.releaseIdleMilliseconds) ms)")
                    member.phase = .released
                    rejoinIfReleased(member)
                case .success(.busy(let reason)):
                    // Sessions here, or another node's to adopt: stay, and count the idle time again.
                    logger.debug("namespace \(member.name): lease kept (\(reason))")
                    member.joined(as: lease, monitor: monitor)
                    joined(member)
                case .success(.fenced):
                    fence("RELEASE in namespace \(member.name) found this node's lease expired")
                case .success(.epochMismatch(let current)):
                    fence("the log of namespace \(member.name) has another history now (epoch \(current ?? "none")): Redis lost its data")
                case .failure(let error):
                    // Released or not, a JOIN now puts the lease back (it is a beat when still held).
                    logger.warning("namespace \(member.name): releasing its lease failed (\(error)); joining again")
                    member.phase = .joining
                    join(member)
                }
            }
        }
    }

    /// A released namespace is needed again (an effect waits, or a follow): JOIN it again.
    func rejoinIfReleased(_ member: ClusterNamespace) {
        guard member.phase == .released, !member.waiting.isEmpty || member.wantsFollow else { return }
        member.phase = .joining
        join(member)
    }
}
