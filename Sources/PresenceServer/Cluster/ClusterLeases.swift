import PresenceCore
import PresenceRedis

/// This node's lease in each namespace it joined (docs/scaling.md, "Liveness"): CREATE the log if
/// it is new, JOIN, BEAT every `--node-beat`, fence when no beat succeeded for `--fence-after`
/// (`LeaseMonitor`), REAP expired nodes and adopt their sessions, LEAVE on a graceful stop.
extension ClusterLink {
    func join(_ member: ClusterNamespace) {
        checkHistory(member) { [unowned self] in create(member) }
    }

    private func create(_ member: ClusterNamespace) {
        member.log.create(epoch: NodeIdentity.randomEpoch(), leaseMilliseconds: settings.leaseMilliseconds) { [unowned self] result in
            runtime.dispatch {
                switch result {
                case .success(.created(let epoch)), .success(.exists(let epoch, _)):
                    rememberHistory(epoch, of: member)
                    joinLease(member, epoch: epoch)
                case .success(.orphanLog):
                    logger.critical("namespace \(member.name): Redis holds its log without its head; refusing to write to it")
                    member.phase = .failed("orphan log")
                case .failure(let error):
                    loadAttemptFailed(member, "opening its log", error) { [unowned self] in join(member) }
                }
            }
        }
    }

    private func joinLease(_ member: ClusterNamespace, epoch: String) {
        let lease = NodeLease(connection: commands, keys: member.keys, node: settings.identity, epoch: epoch)
        let sentAt = clock.milliseconds()
        lease.join { [unowned self] result in
            runtime.dispatch {
                switch result {
                case let .success(.joined(_, leaseMilliseconds, replaced)):
                    for old in replaced { logger.notice("namespace \(member.name): an earlier incarnation \(old) is now dead") }
                    // The log's lease wins over the flag; fence well before it ends.
                    let fenceAfter = min(settings.fenceAfterMilliseconds, leaseMilliseconds * 3 / 5)
                    guard var monitor = try? LeaseMonitor(leaseMilliseconds: leaseMilliseconds, fenceAfterMilliseconds: max(1, fenceAfter))
                    else {
                        return fence("namespace \(member.name) has a lease of \(leaseMilliseconds) ms, too short to fence in time")
                    }
                    monitor.beatSucceeded(sentAt: sentAt)
                    if let since = connectedSince { monitor.connected(at: since) }
                    member.joined(as: lease, monitor: monitor)
                    joined(member)
                case .success(.epochMismatch(let current)):
                    logger.error("namespace \(member.name): the log changed epoch while joining (now \(current ?? "none")); retrying")
                    retries.append { [unowned self] in join(member) }
                case .success(.expired), .success(.dead):
                    fence("namespace \(member.name) refused this incarnation's join")
                case .failure(let error):
                    loadAttemptFailed(member, "joining its lease table", error) { [unowned self] in joinLease(member, epoch: epoch) }
                }
            }
        }
    }

    /// Performs what waited for the join, in order, then follows if asked to.
    func joined(_ member: ClusterNamespace) {
        let waiting = member.waiting
        member.waiting = []
        perform(waiting)
        if member.wantsFollow {
            member.wantsFollow = false
            startFollowing(member)
        }
    }

    // MARK: Beats

    /// Every `--node-beat`: beat in every namespace, fence if a lease is about to run out, reap.
    func beatAll() {
        guard !fenced, !runtime.isStopping else { return }
        let now = clock.milliseconds()
        beatDirectory()
        for member in members.values {
            guard let lease = member.lease, let monitor = member.monitor else { continue }
            if monitor.isFenced(at: now) {
                return fence("no beat in namespace \(member.name) succeeded for \(monitor.fenceAfterMilliseconds) ms")
            }
            if !member.beatInFlight { beat(member, lease: lease) }
            if monitor.mayReap(at: now), member.reapDue || member.moreToReap, !member.reapInFlight { reap(member, lease: lease) }
            releaseIfIdle(member, lease: lease, now: now)
        }
        retryUnresolved()
        runRetries()
        if let line = reachability.reminder(at: now) { logger.warning("\(line)") }
        beatTimer?.schedule(afterMicroseconds: settings.beatMilliseconds * 1000)
    }

    private func beat(_ member: ClusterNamespace, lease: NodeLease) {
        member.beatInFlight = true
        let sentAt = clock.milliseconds()
        lease.beat { [unowned self] result in
            runtime.dispatch {
                member.beatInFlight = false
                switch result {
                case .success(.alive(_, let headRev, let reapDue)):
                    member.monitor?.beatSucceeded(sentAt: sentAt)
                    member.lastHeadRev = headRev
                    member.reapDue = reapDue
                    // Reap at once rather than at the next beat: the kill bound stays lease + beat + grace.
                    if reapDue, let lease = member.lease, member.monitor?.mayReap(at: clock.milliseconds()) == true,
                       !member.reapInFlight {
                        reap(member, lease: lease)
                    }
                case .success(.expired), .success(.unknown):
                    member.monitor?.leaseLost()
                    fence("the lease in namespace \(member.name) expired")
                case .success(.epochMismatch(let current)):
                    member.monitor?.leaseLost()
                    fence("the log of namespace \(member.name) has another history now (epoch \(current ?? "none")): Redis lost its data")
                case .failure:
                    break // counted by the monitor: no success moves the fence deadline
                }
            }
        }
    }

    private func reap(_ member: ClusterNamespace, lease: NodeLease) {
        member.reapInFlight = true
        lease.reap(now: WallClock.nowMilliseconds(), graceMilliseconds: settings.graceMilliseconds) { [unowned self] result in
            runtime.dispatch {
                member.reapInFlight = false
                switch result {
                case .success(.reaped(let reaped)):
                    for dead in reaped.dead {
                        logger.notice("namespace \(member.name): node \(dead.node) is dead (last beat \(dead.lastBeat))")
                    }
                    member.moreToReap = reaped.more
                    adopt(reaped.adopted, in: member)
                case .success(.fenced):
                    fence("REAP in namespace \(member.name) found this node's lease expired")
                case .success(.epochMismatch):
                    fence("the log of namespace \(member.name) has another history now: Redis lost its data")
                case .failure:
                    break
                }
            }
        }
    }

    // MARK: Leave

    /// A graceful stop: LEAVE every namespace (its live sessions count as disconnected now and are
    /// adopted by the survivors), then `done`, at the latest after the Redis timeout.
    func leaveAll(_ done: @escaping () -> Void) {
        if !fenced { directory.nodes.leave { _ in } }
        let leases = fenced ? [] : members.values.compactMap(\.lease)
        guard !leases.isEmpty else { return done() }
        var remaining = leases.count
        var finished = false
        let finish = {
            guard !finished else { return }
            finished = true
            done()
        }
        let deadline = runtime.makeTimer(finish)
        deadline.schedule(afterMicroseconds: settings.redisTimeoutMilliseconds * 1000)
        for lease in leases {
            lease.leave(now: WallClock.nowMilliseconds()) { [unowned self] result in
                runtime.dispatch {
                    if case .failure(let error) = result {
                        logger.warning("leaving namespace \(lease.keys.namespace): \(error)")
                    }
                    remaining -= 1
                    if remaining == 0 {
                        deadline.cancel()
                        finish()
                    }
                }
            }
        }
    }
}
