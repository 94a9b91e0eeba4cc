import Logging
import PresenceCore
import PresenceWire

/// The operator API (`/.admin/…`, admin credential required), health, readiness and metrics: a
/// read-only view of the engine and the connection table, plus closing a connection through the
/// outbound path.
final class OperatorAPI {
    let configuration: ServerConfiguration
    let logger: Logger
    let engine: Engine
    let rest: RESTHandler
    let metrics: ServerMetrics
    let table: ConnectionTable
    let outbox: Outbox
    let storage: StorageLink
    /// Replicated mode: ready only while Redis is reachable and the node is not fenced.
    let cluster: ClusterLink?
    /// Messages and bytes received (the WebSocket route counts them).
    let received: () -> (messages: Int, bytes: Int)
    let startedAt = WallClock.nowMilliseconds()
    /// The dashboard's last ten minutes, one sample a second (OperatorActivity.swift).
    let activity = ActivitySampler()

    init(configuration: ServerConfiguration, logger: Logger, engine: Engine, rest: RESTHandler, metrics: ServerMetrics,
         table: ConnectionTable, outbox: Outbox, storage: StorageLink, cluster: ClusterLink? = nil, received: @escaping () -> (messages: Int, bytes: Int)) {
        self.configuration = configuration
        self.logger = logger
        self.engine = engine
        self.rest = rest
        self.metrics = metrics
        self.table = table
        self.outbox = outbox
        self.storage = storage
        self.cluster = cluster
        self.received = received
    }

    func now() -> Int64 { WallClock.nowMilliseconds() }

    /// The response for an operator route, or nil when `request` is not one.
    func route(_ request: HTTPRequest) -> HTTPResponse? {
        switch request.path {
        case "/healthz":
            return .json(200, "{\"status\":\"ok\"}")
        case "/readyz":
            // Storage opened and restored, rules loaded (both happen before the port opens), the
            // storage thread running, and not stopping; on a cluster, Redis reachable and not fenced
            // (the 503 then says why: a node started while Redis was down is running, not ready).
            let ready = !stopRequested.load(ordering: .relaxed) && storage.isReady
            guard ready else { return .error(503, "not ready") }
            if let reason = cluster?.notReadyReason { return .error(503, "not ready: \(reason)") }
            // Namespaces refused because Redis lost their history are named; the others are served.
            let refused = cluster?.refusals.reasons.keys.sorted() ?? []
            let body = refused.isEmpty ? "{\"status\":\"ready\"}"
                : JSONWriter.string(.object([("status", .string("ready")), ("refused", .array(refused.map { .string($0) }))]))
            return .json(200, body)
        case "/metrics":
            if let cluster { cluster.metrics.record(cluster) }
            let text = metrics.render(engine: engine, liveConnections: table.count) + clusterMetricsText()
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")], body: text)
        default:
            break
        }
        guard request.path == "/.admin" || request.path.hasPrefix("/.admin/") else { return nil }
        // The page's stylesheet and script hold no data (a <script src> cannot send a Bearer header).
        if request.method == "GET", let asset = AdminDashboard.asset(request.path) {
            return HTTPResponse(status: 200, headers: [("Content-Type", asset.contentType), ("Cache-Control", "no-cache")], body: asset.body)
        }
        if let refusal = adminRefusal(request) { return refusal }
        let parts = request.path.split(separator: "/").map(String.init)  // [".admin", …]
        switch (request.method, parts.count > 1 ? parts[1] : "") {
        case ("GET", ""):
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: AdminDashboard.html)
        case ("GET", "connections") where parts.count == 2:
            return listConnections(request)
        case ("POST", "connections") where parts.count == 4 && parts[3] == "close":
            return closeConnection(session: parts[2], request: request)
        case ("GET", "users") where parts.count == 2:
            return listUsers(request)
        case ("GET", "activity") where parts.count == 2:
            return activityResponse(request)
        case ("GET", "users") where parts.count == 3:
            return user(parts[2], request: request)
        case ("GET", "nodes") where parts.count == 2:
            return nodesResponse()
        case ("GET", "stats") where parts.count == 2:
            return stats()
        default:
            return .error(404, "No such admin endpoint")
        }
    }

    func isAdmin(_ request: HTTPRequest) -> Bool {
        guard case .success(let credentials) = rest.resolveCredentials(request, now: now()), credentials.isAdmin else { return false }
        return request.query["auth_variable_override"] == nil
    }

    func connectionJSON(_ snapshot: Engine.ConnectionSnapshot) -> JSON? {
        guard let shell = table[snapshot.id.raw] else { return nil }
        func optional(_ value: String?) -> JSON { value.map { .string($0) } ?? .null }
        return .object([
            ("session", .string(snapshot.session)), ("namespace", .string(snapshot.namespace)),
            ("uid", optional(snapshot.uid)), ("auth", .string(snapshot.auth)), ("remote", .string(shell.remote)),
            ("sdk", optional(snapshot.sdk)), ("userAgent", optional(shell.userAgent)),
            ("connectedAt", .number(Double(shell.connectedAt))), ("lastFrameAt", .number(Double(shell.lastFrameAt))),
            ("listeners", .number(Double(snapshot.listeners))), ("onDisconnectOps", .number(Double(snapshot.onDisconnectOps))),
            ("bytesIn", .number(Double(shell.bytesIn))), ("bytesOut", .number(Double(shell.bytesOut))),
            ("node", optional(nodeID)),
        ])
    }

    func sortedSnapshots(uid: String?, namespace: String?) -> [Engine.ConnectionSnapshot] {
        engine.connectionSnapshots()
            .filter { !$0.isStream && table[$0.id.raw] != nil }
            .filter { uid == nil || $0.uid == uid }
            .filter { namespace == nil || $0.namespace == namespace }
            .sorted { ($0.id.raw) < ($1.id.raw) }
    }

    /// The WebSocket connections that match, by id: no snapshot is built (see `rows(_:)`).
    func sortedConnectionIDs(uid: String?, namespace: String?) -> [UInt64] {
        engine.connectionIDs(uid: uid, namespace: namespace).map(\.raw).filter { table[$0] != nil }.sorted()
    }

    /// The rows of a page of connections (snapshots of these alone).
    func rows(_ ids: ArraySlice<UInt64>) -> [(id: UInt64, row: JSON)] {
        ids.compactMap { id in engine.connectionSnapshot(ConnectionID(id)).flatMap(connectionJSON).map { (id, $0) } }
    }

    func listConnections(_ request: HTTPRequest) -> HTTPResponse {
        let all = sortedConnectionIDs(uid: request.query["uid"].flatMap { $0.isEmpty ? nil : $0 },
                                      namespace: request.query["ns"].flatMap { $0.isEmpty ? nil : $0 })
        let limit = min(max(Int(request.query["limit"] ?? "") ?? 100, 1), 1000)
        let start = min(max(Int(request.query["cursor"] ?? "") ?? 0, 0), all.count)
        let page = all[start..<min(start + limit, all.count)]
        let next: JSON = start + limit < all.count ? .string(String(start + limit)) : .null
        let body: JSON = .object([
            ("connections", .array(rows(page).map(\.row))), ("total", .number(Double(all.count))), ("nextCursor", next),
            ("node", nodeID.map { .string($0) } ?? .null),
        ])
        return .json(200, JSONWriter.string(body))
    }

    /// Closes the connection of `session` if it is on this node (on a cluster, `laterRoute` asks
    /// the other nodes for a session that is not).
    func closeConnection(session: String, request: HTTPRequest) -> HTTPResponse {
        closeHere(session: session, reason: kickReason(request), through: nil)
            ? .json(200, "{\"closed\":true}") : .error(404, "no such session")
    }

    func kickReason(_ request: HTTPRequest) -> String {
        String((try? JSONParser.parse(bytes: request.body))?["reason"]?.stringValue?.prefix(500) ?? "closed by an operator")
    }

    /// Closes `session`'s connection with 4002 if it is here (`through`: the node an operator
    /// asked, when it is another); false when it is not here.
    func closeHere(session: String, reason: String, through node: String?) -> Bool {
        guard let id = engine.connectionID(forSession: session), table[id.raw] != nil else { return false }
        let by = node.map { "operator (through node \($0))" } ?? "operator"
        logger.notice("\(by) closes connection \(id.raw) (session \(session)): \(reason)")
        outbox.perform([.send([id], .serverError("Closed by an operator: \(reason)")),
                        .close(id, code: .closedByOperator, reason: reason)])
        return true
    }

    func user(_ uid: String, request: HTTPRequest) -> HTTPResponse {
        let namespace = request.query["ns"].flatMap { $0.isEmpty ? nil : $0 }
        let connectionsJSON = sortedSnapshots(uid: uid, namespace: namespace).compactMap(connectionJSON)
        var presence: [(String, JSON)] = []
        guard Path.isValidKey(uid) else { return .error(400, "invalid uid") }
        for name in engine.namespaceNames where namespace == nil || namespace == name {
            let value = engine.value(at: Path(validated: ["users", uid, "presence"]), namespace: name)
            if !value.isNull || namespace == name { presence.append((name, value.json())) }
        }
        let held: [JSON] = engine.heldSnapshots().filter { $0.uid == uid && (namespace == nil || $0.namespace == namespace) }.map { entry in
            .object([
                ("session", .string(entry.session)), ("namespace", .string(entry.namespace)),
                ("disconnectedAt", .number(Double(entry.disconnectedAt))), ("runAt", .number(Double(entry.runAt))),
                ("ops", .array(entry.ops.map { .object([("path", .string($0.path.description)), ("value", $0.value)]) })),
            ])
        }
        let limits: [JSON] = engine.limitUsages(uid: uid).filter { namespace == nil || $0.key.namespace == namespace }.map { entry in
            .object([
                ("namespace", .string(entry.key.namespace)), ("limit", .string(entry.key.limit)),
                ("count", .number(Double(entry.usage.count))),
                ("cooldownStartedAt", entry.usage.cooldownStartedAt.map { .number(Double($0)) } ?? .null),
            ])
        }
        let body: JSON = .object([
            ("uid", .string(uid)), ("connections", .array(connectionsJSON)), ("presence", .object(presence)), ("held", .array(held)),
            ("limits", .array(limits)),
        ])
        return .json(200, JSONWriter.string(body))
    }

    func stats() -> HTTPResponse {
        let (messagesIn, bytesIn) = received()
        let body: JSON = .object([
            ("connections", .number(Double(table.count))), ("sessionsHeld", .number(Double(engine.heldSessionCount))),
            ("namespaces", .number(Double(engine.namespaceNames.count))),
            ("uptimeSeconds", .number(Double((now() - startedAt) / 1000))),
            ("messagesIn", .number(Double(messagesIn))), ("messagesOut", .number(Double(outbox.messagesSent))),
            ("bytesIn", .number(Double(bytesIn))), ("bytesOut", .number(Double(outbox.bytesSent))),
            ("writes", .number(Double(engine.counters.writes.values.reduce(0, +)))), ("pushes", .number(Double(outbox.pushes))),
            ("time", .number(Double(now()))), ("node", nodeID.map { .string($0) } ?? .null),
        ])
        return .json(200, JSONWriter.string(body))
    }
}
