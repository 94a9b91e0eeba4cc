import PresenceCore
import PresenceRedis

/// The operators' view of the whole cluster (docs/scaling.md, "Operators"): every `--node-beat`
/// the node writes what it says about itself (address, connections, lag) into the global node
/// list and reads the list back; the same call brings the kicks other nodes forwarded. The list is
/// served from this cache (at most one beat old), so `/.admin/nodes` needs no Redis round trip.
final class ClusterDirectory {
    /// A silent node stays listed this long (operators see it die), then leaves the list.
    static let forgetAfterMilliseconds: Int64 = 5 * 60_000
    /// Kicks older than this are trimmed: a node that was away longer does not act on them.
    static let keepKicksMilliseconds: Int64 = 60_000

    let nodes: NodeDirectory
    /// What this node says about itself, read at each beat (set by the server).
    var status: () -> JSON = { .object([]) }
    /// A kick forwarded by another node (set by the operator API).
    var onKick: (NodeDirectory.Kick) -> Void = { _ in }
    private(set) var list: [NodeDirectory.Entry] = []
    /// Redis's time at the last beat, and this node's wall clock then: a beat's age is measured
    /// on Redis's clock, then aged on ours.
    private(set) var redisTime: Int64 = 0
    private(set) var observedAt: Int64 = 0
    var inFlight = false

    init(connection: RedisConnection, nodeID: String) {
        nodes = NodeDirectory(connection: connection, nodeID: nodeID)
    }

    func received(_ beat: NodeDirectory.Beat, at now: Int64) {
        list = beat.nodes
        redisTime = beat.redisTime
        observedAt = now
    }

    /// How long ago `entry` beat, as of `now` (wall ms); nil before the first beat.
    func age(of entry: NodeDirectory.Entry, now: Int64) -> Int64? {
        guard observedAt > 0 else { return nil }
        return max(0, redisTime - entry.lastBeat) + max(0, now - observedAt)
    }
}

extension ClusterLink {
    /// Every beat: this node's line in the node list, the list back, and kicks for this node.
    func beatDirectory() {
        guard !directory.inFlight else { return }
        directory.inFlight = true
        let info = Array(JSONWriter.string(directory.status()).utf8)
        let sent = MonotonicClock.nanoseconds()
        directory.nodes.beat(info: info, forgetAfterMilliseconds: ClusterDirectory.forgetAfterMilliseconds,
                             keepKicksMilliseconds: ClusterDirectory.keepKicksMilliseconds) { [unowned self] result in
            runtime.dispatch {
                directory.inFlight = false
                switch result {
                case .success(let beat):
                    metrics.roundTrip(since: sent)
                    directory.received(beat, at: WallClock.nowMilliseconds())
                    for kick in beat.kicks { directory.onKick(kick) }
                case .failure(let error):
                    logger.debug("the node list beat failed: \(error)")
                }
            }
        }
    }

    /// The node list as `/.admin/nodes` shows it.
    func nodesJSON(now: Int64) -> JSON {
        let rows: [JSON] = directory.list.sorted { $0.id < $1.id }.map { entry in
            let age = directory.age(of: entry, now: now)
            var fields: [(String, JSON)] = [("id", .string(entry.id)), ("self", .bool(entry.id == settings.nodeID))]
            if case .object(let info)? = try? JSONParser.parse(bytes: entry.info) { fields += info }
            fields += [
                ("lastBeat", .number(Double(entry.lastBeat))), ("beatAgeMs", age.map { .number(Double($0)) } ?? .null),
                ("state", .string(age.map { $0 <= settings.leaseMilliseconds ? "alive" : "silent" } ?? "unknown")),
            ]
            return .object(fields)
        }
        return .object([
            ("cluster", .bool(true)), ("self", .string(settings.nodeID)), ("redis", .string(settings.redisAddress)),
            ("redisUp", .bool(isReady)), ("observedAt", .number(Double(directory.observedAt))), ("nodes", .array(rows)),
        ])
    }

    /// Prometheus lines for every node in the list: its lag, connections and beat age.
    func nodeMetricsText(now: Int64) -> String {
        var lag = "# TYPE presence_cluster_node_lag_revisions gauge\n"
        var connections = "# TYPE presence_cluster_node_connections gauge\n"
        var age = "# TYPE presence_cluster_node_beat_age_seconds gauge\n"
        for entry in directory.list {
            let info = try? JSONParser.parse(bytes: entry.info)
            let label = "{node=\"\(Self.escapeLabel(entry.id))\"}"
            if let value = info?["lag"]?.numberValue, value.isFinite { lag += "presence_cluster_node_lag_revisions\(label) \(Int64(value))\n" }
            if let value = info?["connections"]?.numberValue, value.isFinite {
                connections += "presence_cluster_node_connections\(label) \(Int64(value))\n"
            }
            if let value = directory.age(of: entry, now: now) {
                age += "presence_cluster_node_beat_age_seconds\(label) \(Double(value) / 1000)\n"
            }
        }
        return lag + connections + age
    }

    static func escapeLabel(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }
}
