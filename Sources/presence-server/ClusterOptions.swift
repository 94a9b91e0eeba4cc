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

    @Option(help: "--storage redis: seconds a namespace this node no longer follows, and holds no sessions of, keeps its lease before the node releases it (stops beating there).")
    var releaseIdle = 30.0

    static let flagNames = ["redis", "node-id", "node-lease", "node-beat", "fence-after", "redis-timeout", "release-idle"]

    /// The node's name when `--node-id` is not given: this host and the port asked for (the process
    /// id when the port is picked by the system).
    func nodeName(port: Int) -> String {
        if let nodeID { return nodeID }
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count) == 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "node"
        return port == 0 ? "\(host):pid\(getpid())" : "\(host):\(port)"
    }

    func settings(port: Int, disconnectGrace: Double) throws(ClusterSettings.Invalid) -> ClusterSettings {
        try ClusterSettings(redis: redis, nodeName: nodeName(port: port), leaseSeconds: nodeLease, fenceAfterSeconds: fenceAfter,
                            beatSeconds: nodeBeat, redisTimeoutSeconds: redisTimeout, releaseIdleSeconds: releaseIdle,
                            graceMilliseconds: Int64((disconnectGrace * 1000).rounded()))
    }

    func effectiveConfiguration() -> [(String, JSON)] {
        [("redis", .string(redis)), ("node-id", nodeID.map { .string($0) } ?? .null), ("node-lease", .number(nodeLease)),
         ("node-beat", .number(nodeBeat)), ("fence-after", .number(fenceAfter)), ("redis-timeout", .number(redisTimeout)),
         ("release-idle", .number(releaseIdle))]
    }
}
