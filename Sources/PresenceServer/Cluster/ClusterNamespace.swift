import PresenceCore
import PresenceRedis

/// One namespace as this node takes part in it (docs/scaling.md, "Keys"): its log, its lease in
/// the namespace's lease table, its session store, and where following its log stands. A
/// namespace the node no longer follows, and holds no sessions of, is released after
/// `--release-idle` (RELEASE, ClusterIdleLeases.swift) and joined again when it is needed.
final class ClusterNamespace {
    enum Phase: Equatable {
        /// Creating the log (or reading its epoch) and joining its lease table.
        case joining
        /// Joined; not following its log (never asked to, or released).
        case idle
        /// Reading the head, then the tail delivers from the first revision up to it.
        case catchingUp(head: UInt64?)
        /// Caught up: the engine serves it; the tail keeps it current.
        case serving
        /// Cannot follow it (an apply error, a trimmed log); said once in the log.
        case failed(String)
        /// RELEASE sent: effects wait, as while joining, until it is answered.
        case releasing
        /// Out of the lease table: no beats; the next effect or follow joins again.
        case released
    }

    let keys: RedisKeys
    let log: RedisLog
    var phase = Phase.joining
    /// Set once joined.
    private(set) var lease: NodeLease?
    private(set) var sessions: RedisSessions?
    var monitor: LeaseMonitor?
    /// Asked to follow while still joining: start once joined.
    var wantsFollow = false
    /// Effects that arrived before the join finished, performed in order after it.
    var waiting: [ClusterEffect] = []
    var beatInFlight = false
    var reapInFlight = false
    /// Reaped sessions of down nodes remain: reap again at the next beat.
    var moreToReap = false
    /// The last beat said REAP has work (an expired lease, a down node); true until a beat says not.
    var reapDue = true
    /// Bumped by every start and stop of following: an answer to an older one is dropped.
    var generation = 0
    /// Gaps the tail reported in a row (a re-follow racing a read in flight); reset by entries.
    var gaps = 0
    /// The log's head as the last successful beat returned it (for the lag metric).
    var lastHeadRev: UInt64 = 0
    /// Since when (monotonic ms) the namespace has been joined, idle and quiet: released after
    /// `--release-idle`.
    var idleSince: Int64?
    /// Snapshots of this namespace: the newest known, when to write the next, what to trim.
    let snapshots = SnapshotSchedule()

    var name: String { keys.namespace }
    var epoch: String? { lease?.epoch }
    var isJoined: Bool { lease != nil }
    /// Revisions the tail brings go to the engine (the head is read, and nothing failed).
    var isApplying: Bool {
        switch phase {
        case .catchingUp(head: _?), .serving: true
        default: false
        }
    }

    init(keys: RedisKeys, connection: RedisConnection) {
        self.keys = keys
        log = RedisLog(connection: connection, keys: keys)
    }

    func joined(as lease: NodeLease, monitor: LeaseMonitor) {
        self.lease = lease
        sessions = RedisSessions(member: lease)
        self.monitor = monitor
        phase = .idle
    }

    /// RELEASE is on its way: act as not joined (effects wait) and beat no more.
    func leaseReleased() {
        lease = nil
        sessions = nil
        monitor = nil
        idleSince = nil
        phase = .releasing
    }
}
