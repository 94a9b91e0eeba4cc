import CoreMetrics
import PresenceRedis

/// The cluster's side of `/metrics` (`--storage redis`): whether Redis is reachable, how far this
/// node's replicas lag behind their logs (from the head revision each BEAT returns), steps
/// waiting for Redis, and the command connection's failures and reconnects.
final class ClusterMetrics {
    private let redisUp = CoreMetrics.Gauge(label: "presence_cluster_redis_up")
    private let lag = CoreMetrics.Gauge(label: "presence_cluster_lag_revisions")
    private let pendingSteps = CoreMetrics.Gauge(label: "presence_cluster_pending_steps")
    /// Namespaces refused because Redis lost their history (an operator must act: alert on > 0).
    private let refusedNamespaces = CoreMetrics.Gauge(label: "presence_cluster_refused_namespaces")
    private let failedCommands = CoreMetrics.Counter(label: "presence_cluster_redis_failed_commands_total")
    private let reconnects = CoreMetrics.Counter(label: "presence_cluster_redis_connects_total")
    private let snapshotsWrittenCounter = CoreMetrics.Counter(label: "presence_cluster_snapshots_written_total")
    private let snapshotsLoadedCounter = CoreMetrics.Counter(label: "presence_cluster_snapshots_loaded_total")
    /// SEQ and node-list beats, sent to answered (a histogram: `_bucket`, `_sum`, `_count`).
    private let redisRoundTrip = CoreMetrics.Timer(label: "presence_cluster_redis_round_trip_seconds")
    private var exportedFailures = 0
    private var exportedConnects = 0
    /// Snapshots this node published, and loaded to start following a namespace.
    var snapshotsWritten = 0
    var snapshotsLoaded = 0
    private var exportedSnapshots = (written: 0, loaded: 0)

    func roundTrip(since sent: UInt64) {
        redisRoundTrip.recordNanoseconds(Int64(clamping: MonotonicClock.nanoseconds() &- sent))
    }

    /// Records the link's state now (called when `/metrics` is scraped).
    func record(_ link: ClusterLink) {
        redisUp.record(link.isConnected && !link.fenced ? 1 : 0)
        lag.record(link.largestLag)
        pendingSteps.record(link.engine.pendingStepCount)
        refusedNamespaces.record(link.refusals.reasons.count)
        let now = link.commands.statistics
        if now.failedCommands > exportedFailures { failedCommands.increment(by: now.failedCommands - exportedFailures) }
        if now.connects > exportedConnects { reconnects.increment(by: now.connects - exportedConnects) }
        exportedFailures = now.failedCommands
        exportedConnects = now.connects
        if snapshotsWritten > exportedSnapshots.written { snapshotsWrittenCounter.increment(by: snapshotsWritten - exportedSnapshots.written) }
        if snapshotsLoaded > exportedSnapshots.loaded { snapshotsLoadedCounter.increment(by: snapshotsLoaded - exportedSnapshots.loaded) }
        exportedSnapshots = (snapshotsWritten, snapshotsLoaded)
    }
}

extension ClusterLink {
    /// The largest `head - applied` over the namespaces this node serves, as the last beats saw it.
    var largestLag: Int {
        var largest: UInt64 = 0
        for member in members.values where member.phase == .serving {
            guard let applied = engine.appliedRevision(namespace: member.name), member.lastHeadRev > applied else { continue }
            largest = max(largest, member.lastHeadRev - applied)
        }
        return Int(clamping: largest)
    }
}
