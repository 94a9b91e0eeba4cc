import PresenceCore
import PresenceRedis
import PresenceWire

/// The cluster-wide `/.admin/connections` and kick (docs/scaling.md, "Operators"): the node asked
/// gathers the other live nodes' answers through Redis (`ClusterLink.gather`) and merges them with
/// its own (`ConnectionPages`): no reply grows with the number of connections. A single node
/// answers at once, as before.
extension OperatorAPI {
    /// An answer made after a round through Redis: call it with the function that sends the response.
    typealias LaterResponse = (@escaping (HTTPResponse) -> Void) -> Void

    /// How long the node asked waits for the others: the Redis timeout, within 0.5-2 s.
    var gatherWaitMilliseconds: Int64 { min(2000, max(500, cluster?.settings.redisTimeoutMilliseconds ?? 2000)) }

    /// A cluster's operator request that needs the other nodes (the listing, a kick of a session
    /// not held here), or nil: `route` answers it at once.
    func laterRoute(_ request: HTTPRequest) -> LaterResponse? {
        guard let cluster, request.path.hasPrefix("/.admin/connections"), isAdmin(request) else { return nil }
        let parts = request.path.split(separator: "/").map(String.init)
        switch (request.method, parts.count) {
        case ("GET", 2) where request.query["scope"] != "node":
            return clusterConnections(request, cluster)
        case ("POST", 4) where parts[3] == "close":
            let session = parts[2]
            if let id = engine.connectionID(forSession: session), table[id.raw] != nil { return nil }
            return clusterKick(session: session, reason: kickReason(request), cluster)
        default:
            return nil
        }
    }

    /// This node's part of a listing (`ConnectionPages.answer`).
    func localConnectionsPage(_ query: ConnectionPages.Query) -> JSON {
        let me = nodeID ?? ""
        let all = sortedConnectionIDs(uid: query.uid, namespace: query.namespace)
        let start = ConnectionPages.start(of: all, node: me, after: query.after)
        let end = min(start + query.limit, all.count)
        return ConnectionPages.answer(node: me, total: all.count, more: end < all.count, rows: rows(all[start..<end]))
    }

    private func clusterConnections(_ request: HTTPRequest, _ cluster: ClusterLink) -> LaterResponse {
        let limit = min(max(Int(request.query["limit"] ?? "") ?? 100, 1), 1000)
        var after: ConnectionPages.Cursor?
        if let text = request.query["cursor"], !text.isEmpty {
            guard let cursor = ConnectionPages.cursor(text) else {
                return { $0(.error(400, "invalid cursor: pass the nextCursor of the previous page")) }
            }
            after = cursor
        }
        let query = ConnectionPages.Query(uid: request.query["uid"].flatMap { $0.isEmpty ? nil : $0 },
                                          namespace: request.query["ns"].flatMap { $0.isEmpty ? nil : $0 }, limit: limit, after: after)
        return { [self] respond in
            cluster.gather(kind: "connections", body: query.json, waitMilliseconds: gatherWaitMilliseconds) { [self] gathered in
                var answers = gathered.answers
                answers[nodeID ?? ""] = localConnectionsPage(query)
                respond(.json(200, JSONWriter.string(mergedListing(answers, gathered, limit: limit, cluster: cluster))))
            }
        }
    }

    private func mergedListing(_ answers: [String: JSON], _ gathered: ClusterAsks.Gathered, limit: Int, cluster: ClusterLink) -> JSON {
        let merged = ConnectionPages.merge(answers, limit: limit)
        var fields: [(String, JSON)] = [
            ("connections", .array(merged.rows)), ("total", .number(merged.total)), ("nextCursor", merged.nextCursor.map { .string($0) } ?? .null),
            ("node", .string(cluster.settings.nodeID)), ("cluster", .bool(true)),
            ("nodes", .array(merged.nodes.map { .object([("id", .string($0.id)), ("connections", .number($0.connections))]) })),
            ("missing", .array(gathered.missing.map { .string($0) })),
            // Silent when asked (a node that turned silent during the wait is already in `missing`).
            ("silent", .array(cluster.silentNodes(now: now()).filter { !gathered.missing.contains($0) }.map { .string($0) })),
        ]
        if let failure = gathered.failure { fields.append(("error", .string(failure))) }
        return .object(fields)
    }

    /// A kick of a session not held here: every live node is asked; 200 when one closed it, 404
    /// once every live node said it is not there, 202 when some did not answer in time (they
    /// still act on the kick when they read it), 503 when Redis did not take the ask.
    private func clusterKick(session: String, reason: String, _ cluster: ClusterLink) -> LaterResponse {
        guard !session.isEmpty, session.utf8.count <= 128 else { return { $0(.error(400, "invalid session id")) } }
        logger.notice("operator kick of session \(session), not on this node: asking every node: \(reason)")
        let body: JSON = .object([("session", .string(session)), ("reason", .string(reason))])
        return { [self] respond in
            cluster.gather(kind: "kick", body: body, waitMilliseconds: gatherWaitMilliseconds,
                           enough: { answers in answers.values.contains { $0["closed"] == .bool(true) } }) { gathered in
                if let (node, _) = gathered.answers.first(where: { $0.value["closed"] == .bool(true) }) {
                    return respond(.json(200, JSONWriter.string(.object([("closed", .bool(true)), ("node", .string(node))]))))
                }
                if let failure = gathered.failure {
                    return respond(.error(503, "the session is not on this node, and the other nodes could not be asked: \(failure)"))
                }
                if gathered.missing.isEmpty { return respond(.error(404, "no such session on any node")) }
                let answer: JSON = .object([
                    ("closed", .bool(false)), ("forwarded", .bool(true)), ("missing", .array(gathered.missing.map { .string($0) })),
                ])
                respond(.json(202, JSONWriter.string(answer)))
            }
        }
    }

    /// Another node's ask (a listing or a kick): this node's answer.
    func answerClusterAsk(_ ask: NodeAsks.Ask) -> JSON? {
        guard let body = try? JSONParser.parse(bytes: ask.body) else { return nil }
        switch ask.kind {
        case "connections":
            return ConnectionPages.Query(ask: body).map(localConnectionsPage)
        case "kick":
            guard let session = body["session"]?.stringValue else { return nil }
            let reason = String((body["reason"]?.stringValue ?? "").prefix(500))
            let closed = closeHere(session: session, reason: reason.isEmpty ? "closed by an operator" : reason, through: ask.from)
            return .object([("node", .string(nodeID ?? "")), ("closed", .bool(closed))])
        default:
            return nil
        }
    }
}
