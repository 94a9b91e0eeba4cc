#if canImport(Glibc)
import Glibc
#endif
import PresenceCore
import PresenceRedis
import PresenceWire

/// The operator API's cluster side (docs/scaling.md, "Operators"): the node list, the node a
/// connection is on (the cluster-wide listing and kicks are in OperatorConnections.swift).
extension OperatorAPI {
    /// The node id connections on this node show (`name#incarnation`), nil on a single node.
    var nodeID: String? { cluster?.settings.nodeID }

    /// The address operators reach this node at: the listening host and port, or this host's
    /// name when it listens on every interface.
    static func advertisedAddress(host: String, port: Int) -> String {
        guard ["0.0.0.0", "::", "[::]", ""].contains(host) else { return "\(host):\(port)" }
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "\(host):\(port)" }
        return "\(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)):\(port)"
    }

    /// What this node writes into the cluster's node list at each beat.
    func nodeStatus(address: String) -> JSON {
        .object([
            ("name", .string(cluster?.settings.identity.name ?? "")), ("address", .string(address)),
            ("connections", .number(Double(table.count))), ("lag", .number(Double(cluster?.largestLag ?? 0))),
            ("namespaces", .number(Double(engine.namespaceNames.count))), ("startedAt", .number(Double(startedAt))),
            ("ready", .bool(cluster?.isReady ?? true)), ("refused", cluster?.refusals.json ?? .object([])),
        ])
    }

    /// `GET /.admin/nodes`: every node of the cluster as the last beat saw it; on a single node,
    /// this node alone.
    func nodesResponse() -> HTTPResponse {
        guard let cluster else {
            let me: JSON = .object([("id", .string("local")), ("self", .bool(true)), ("connections", .number(Double(table.count))),
                                    ("startedAt", .number(Double(startedAt))), ("state", .string("alive"))])
            return .json(200, JSONWriter.string(.object([("cluster", .bool(false)), ("nodes", .array([me]))])))
        }
        return .json(200, JSONWriter.string(cluster.nodesJSON(now: now())))
    }

    /// A kick forwarded through the kicks stream (by a node of an earlier version, during a
    /// rolling upgrade): close the connection if it is here.
    func kickFromCluster(_ kick: NodeDirectory.Kick) {
        _ = closeHere(session: kick.session, reason: kick.reason.isEmpty ? "closed by an operator" : kick.reason, through: kick.from)
    }

    /// `/metrics` lines for every node in the list (a cluster only).
    func clusterMetricsText() -> String {
        cluster?.nodeMetricsText(now: now()) ?? ""
    }
}
