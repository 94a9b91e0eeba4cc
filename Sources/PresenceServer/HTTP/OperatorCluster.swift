#if canImport(Glibc)
import Glibc
#endif
import PresenceCore
import PresenceRedis
import PresenceWire

/// The operator API's cluster side (docs/scaling.md, "Operators"): the node list, the node a
/// connection is on, and kicks carried through Redis to the node that holds the connection.
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

    /// A kick for a session this node does not hold: on a cluster, forwarded to every node
    /// through Redis (202); the node that holds it closes it at its next beat.
    func forwardClose(session: String, reason: String) -> HTTPResponse {
        guard let cluster else { return .error(404, "no such session") }
        guard !session.isEmpty, session.utf8.count <= 128 else { return .error(400, "invalid session id") }
        logger.notice("operator kick of session \(session) forwarded to the cluster: \(reason)")
        cluster.forwardKick(session: session, reason: reason)
        return .json(202, JSONWriter.string(.object([("closed", .bool(false)), ("forwarded", .bool(true))])))
    }

    /// Another node forwarded a kick: close the connection if it is here.
    func kickFromCluster(_ kick: NodeDirectory.Kick) {
        guard let id = engine.connectionID(forSession: kick.session), table[id.raw] != nil else { return }
        let reason = kick.reason.isEmpty ? "closed by an operator" : kick.reason
        logger.notice("operator (through node \(kick.from)) closes connection \(id.raw) (session \(kick.session)): \(reason)")
        outbox.perform([.send([id], .serverError("Closed by an operator: \(reason)")),
                        .close(id, code: .closedByOperator, reason: reason)])
    }

    /// `/metrics` lines for every node in the list (a cluster only).
    func clusterMetricsText() -> String {
        cluster?.nodeMetricsText(now: now()) ?? ""
    }
}
