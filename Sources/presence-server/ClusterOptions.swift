import ArgumentParser
import PresenceCore
import PresenceServer

#if canImport(Glibc)
import Glibc
#endif

/// The flags of `--storage redis`: one node of a cluster on one Redis (docs/scaling.md).
struct ClusterOptions: ParsableArguments {
    @Option(help: "--storage redis: Redis as HOST:PORT, a numeric address ([::1]:6379 for IPv6). Use appendonly yes and appendfsync always there.")
    var redis = "127.0.0.1:6379"

    @Option(help: "--storage redis: this node's stable name (no '#'); a restart with the same name replaces the previous incarnation at once. Default: hostname:port.")
    var nodeID: String?

    @Option(help: "--storage redis: seconds of lease a node gets per beat, written into a namespace's log when this node creates it (the log's value wins afterwards).")
    var nodeLease = 5.0

    @Option(help: "--storage redis: seconds between beats (and reaps of dead nodes).")
    var nodeBeat = 1.0

    @Option(help: "--storage redis: seconds without a successful beat after which the node stops serving (fencing); below --node-lease.")
    var fenceAfter = 3.0

    @Option(help: "--storage redis: seconds to connect to Redis and for each command.")
    var redisTimeout = 2.0

    @Option(help: "--storage redis: seconds a namespace is kept once nothing on this node uses it: one that holds data stays followed (in memory) this long, then is dropped and reloaded when a client comes back; once not followed, its lease is kept this long before the node releases it (stops beating there).")
    var releaseIdle = 30.0

    @Option(help: "--storage redis: seconds between snapshots of a namespace's replica (one node writes each; the log is trimmed behind it).")
    var snapshotEvery = 60.0

    @Option(help: "--storage redis: also write a snapshot after this many new revisions, if sooner.")
    var snapshotEntries = 100_000

    @Option(help: "--storage redis: seconds of log kept behind a snapshot, so that a node restarting (or lagging) within that catches up from the log; at least 120 in production.")
    var logKeep = 120.0

    @Option(help: "--storage redis: namespaces (comma-separated) to load at start, from the newest snapshot and the log after it; /readyz answers 503 until each has caught up. Others load when a client first names them.")
    var preload = ""

    @Option(help: "--storage redis: the file where this node remembers the history (log epoch) of every namespace it served; a node that finds Redis without that history (Redis lost its data) refuses to serve the namespace instead of starting it empty. Default: --data-dir/cluster-state-<node id>.json (one file per node id); a node that cannot write it does not start. 'none' forgets (unsafe: after Redis loses its data, the node would serve the namespace empty, a silent rollback).")
    var clusterState: String?

    static let flagNames = ["redis", "node-id", "node-lease", "node-beat", "fence-after", "redis-timeout",
                            "snapshot-every", "snapshot-entries", "log-keep", "preload", "cluster-state", "release-idle"]

    /// The node's name when `--node-id` is not given: this host and the port asked for (the process
    /// id when the port is picked by the system).
    func nodeName(port: Int) -> String {
        if let nodeID { return nodeID }
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count) == 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "node"
        return port == 0 ? "\(host):pid\(getpid())" : "\(host):\(port)"
    }

    /// `--cluster-state` as given, the default file in `dataDir` for this node's name, or nil for `none`.
    func clusterStatePath(port: Int, dataDir: String) throws(ClusterSettings.Invalid) -> String? {
        if clusterState == ClusterStateFile.disabled { return nil }
        if let clusterState { return clusterState }
        do {
            return try ClusterStateFile.defaultPath(dataDirectory: dataDir, nodeName: nodeName(port: port))
        } catch {
            throw .clusterState(error.description)
        }
    }

    func settings(port: Int, disconnectGrace: Double, dataDir: String) throws(ClusterSettings.Invalid) -> ClusterSettings {
        try ClusterSettings(redis: redis, nodeName: nodeName(port: port), leaseSeconds: nodeLease, fenceAfterSeconds: fenceAfter,
                            beatSeconds: nodeBeat, redisTimeoutSeconds: redisTimeout, releaseIdleSeconds: releaseIdle,
                            graceMilliseconds: Int64((disconnectGrace * 1000).rounded()),
                            snapshotEverySeconds: snapshotEvery, snapshotEntries: snapshotEntries, logKeepSeconds: logKeep,
                            preload: preload.split(separator: ",").map(String.init).filter { !$0.isEmpty },
                            clusterStatePath: clusterStatePath(port: port, dataDir: dataDir))
    }

    func effectiveConfiguration(port: Int, dataDir: String) -> [(String, JSON)] {
        // The file in use ("disabled" when off); when no default path can be made, what was given.
        let state: String?
        do {
            state = try clusterStatePath(port: port, dataDir: dataDir) ?? ClusterStateFile.disabled
        } catch {
            state = clusterState
        }
        let stateJSON: JSON = state.map { JSON.string($0) } ?? .null
        let nodeJSON: JSON = nodeID.map { JSON.string($0) } ?? .null
        var fields: [(String, JSON)] = [("redis", .string(redis)), ("node-id", nodeJSON), ("node-lease", .number(nodeLease))]
        fields += [("node-beat", .number(nodeBeat)), ("fence-after", .number(fenceAfter)), ("redis-timeout", .number(redisTimeout))]
        fields += [("snapshot-every", .number(snapshotEvery)), ("snapshot-entries", .number(Double(snapshotEntries)))]
        fields += [("release-idle", .number(releaseIdle)), ("log-keep", .number(logKeep)), ("preload", .string(preload))]
        fields.append(("cluster-state", stateJSON))
        return fields
    }
}
