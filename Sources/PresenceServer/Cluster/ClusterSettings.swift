import PresenceRedis

/// How this node joins a Redis-backed cluster (`--storage redis`, docs/scaling.md): where Redis is,
/// this node's identity in the logs, and the lease timings. Validated when it is built, so a bad
/// flag is refused before anything starts.
public struct ClusterSettings: Sendable {
    public enum Invalid: Error, CustomStringConvertible {
        case endpoint(String)
        case nodeName(String)
        case timing(String)
        case namespace(String)
        case clusterState(String)

        public var description: String {
            switch self {
            case .endpoint(let reason): return "--redis: \(reason)"
            case .nodeName(let name): return "--node-id \(name): must be 1-200 bytes without '#'"
            case .timing(let reason): return reason
            case .clusterState(let reason): return reason
            case .namespace(let name): return "--preload \(name): not a namespace name a cluster can hold (1-512 bytes)"
            }
        }
    }

    let endpoint: RedisEndpoint
    let identity: NodeIdentity
    /// Lease written into a namespace's log when this node creates it (the log's value wins after).
    let leaseMilliseconds: Int64
    /// No successful beat for this long (counted from the send): the node fences itself.
    let fenceAfterMilliseconds: Int64
    /// Beat and reap period.
    let beatMilliseconds: Int64
    /// Connect and command timeout.
    let redisTimeoutMilliseconds: Int64
    /// A namespace not followed and holding no sessions here for this long is released (RELEASE).
    let releaseIdleMilliseconds: Int64
    /// The engine's grace window: adopted live sessions run this long after the reap.
    let graceMilliseconds: Int64
    /// Snapshots (docs/scaling.md, "Snapshots and the bounded log"): a node that serves a
    /// namespace writes one (if no other node is writing one) this long after the last, or after
    /// `snapshotEntries` new revisions, whichever comes first.
    let snapshotEveryMilliseconds: Int64
    let snapshotEntries: UInt64
    /// How much log a snapshot leaves behind it: entries appended in the last `logKeepMilliseconds`
    /// are never trimmed, so a node that restarts (or lags) within that catches up from the log.
    let logKeepMilliseconds: Int64
    /// Namespaces followed from the start (`--preload`): `/readyz` is 503 until each has caught up.
    let preload: [String]
    /// `--cluster-state`: where this node remembers each namespace's history (`ClusterHistory`);
    /// nil only with `--cluster-state none`.
    public let clusterStatePath: String?

    /// This node's id in the logs (`name#incarnation`), for `ReplicationConfiguration(node:)`.
    public var nodeID: String { identity.id }
    /// `host:port` of Redis, as given.
    public var redisAddress: String { endpoint.description }

    /// Blocking: nil when this node can keep its memory of the histories it serves (or has none,
    /// `--cluster-state none`), else why not. Call before the loop starts.
    public func prepareClusterState() -> String? {
        clusterStatePath.flatMap { ClusterStateFile.prepare($0) }
    }

    public init(redis: String, nodeName: String, leaseSeconds: Double = 5, fenceAfterSeconds: Double = 3,
                beatSeconds: Double = 1, redisTimeoutSeconds: Double = 2, releaseIdleSeconds: Double = 30,
                graceMilliseconds: Int64,
                snapshotEverySeconds: Double = 60, snapshotEntries: Int = 100_000, logKeepSeconds: Double = 120,
                preload: [String] = [], clusterStatePath: String? = nil) throws(Invalid) {
        do {
            endpoint = try RedisEndpoint(parsing: redis)
        } catch {
            throw .endpoint(error.description)
        }
        do {
            identity = try NodeIdentity(name: nodeName)
        } catch {
            throw .nodeName(nodeName)
        }
        func milliseconds(_ seconds: Double, _ flag: String, _ range: ClosedRange<Double>) throws(Invalid) -> Int64 {
            guard seconds.isFinite, range.contains(seconds) else {
                throw .timing("\(flag) must be between \(range.lowerBound) and \(range.upperBound) seconds")
            }
            return Int64((seconds * 1000).rounded())
        }
        leaseMilliseconds = try milliseconds(leaseSeconds, "--node-lease", 1...600)
        fenceAfterMilliseconds = try milliseconds(fenceAfterSeconds, "--fence-after", 0.1...600)
        beatMilliseconds = try milliseconds(beatSeconds, "--node-beat", 0.05...60)
        redisTimeoutMilliseconds = try milliseconds(redisTimeoutSeconds, "--redis-timeout", 0.1...60)
        releaseIdleMilliseconds = try milliseconds(releaseIdleSeconds, "--release-idle", 0.1...86_400)
        self.graceMilliseconds = max(0, graceMilliseconds)
        snapshotEveryMilliseconds = try milliseconds(snapshotEverySeconds, "--snapshot-every", 0.1...86_400)
        guard (1...1_000_000_000).contains(snapshotEntries) else {
            throw .timing("--snapshot-entries must be between 1 and 1000000000")
        }
        self.snapshotEntries = UInt64(snapshotEntries)
        logKeepMilliseconds = try milliseconds(logKeepSeconds, "--log-keep", 0...86_400)
        for name in preload {
            guard (try? RedisKeys(namespace: name)) != nil else { throw .namespace(name) }
        }
        self.preload = Array(Set(preload)).sorted()
        if let clusterStatePath {
            do { _ = try ClusterHistory(path: clusterStatePath) } catch { throw .clusterState(error.description) }
        }
        self.clusterStatePath = clusterStatePath
        guard fenceAfterMilliseconds < leaseMilliseconds else {
            throw .timing("--fence-after must be below --node-lease: a node must fence itself before others may declare it dead")
        }
        guard beatMilliseconds < fenceAfterMilliseconds else {
            throw .timing("--node-beat must be below --fence-after, or a healthy node would fence itself between beats")
        }
    }
}
