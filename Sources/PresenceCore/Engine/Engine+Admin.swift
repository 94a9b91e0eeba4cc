/// What operators see of the engine (the shell adds socket facts: remote address, bytes, times).
extension Engine {
    public struct ConnectionSnapshot: Sendable {
        public var id: ConnectionID
        public var session: String
        public var namespace: String
        public var uid: String?
        /// "user", "admin" or "anonymous".
        public var auth: String
        public var sdk: String?
        public var listeners: Int
        public var onDisconnectOps: Int
        public var isStream: Bool
    }

    public struct HeldSnapshot: Sendable {
        public var session: String
        public var namespace: String
        public var uid: String?
        public var disconnectedAt: Int64
        public var runAt: Int64
        public var ops: [OnDisconnectOp]
    }

    /// Counts for metrics; they only grow.
    public struct Counters: Sendable {
        public var writes: [String: Int] = [:]
        public var ruleDenials: [String: Int] = [:]
        public var authFailures = 0
        public var onDisconnectOpsRun = 0
        public var onDisconnectSessionsHeld = 0
        /// Security-rule checks run (reads and writes), and filtered query results computed for
        /// pushes: what a request really cost, which tests count to catch work that grows with
        /// what a connection holds.
        public var ruleChecks = 0
        public var queryResultsComputed = 0
        /// Filtered query windows moved by one child's write and pushed as what changed
        /// (`ChildOrder`), instead of computed whole.
        public var queryWindowChangesComputed = 0
        /// Requests refused by a per-connection limit, a read budget or the namespace cap.
        public var limitRefusals = 0
        public init() {}
    }

    public func connectionSnapshots() -> [ConnectionSnapshot] {
        connections.values.map(snapshot)
    }

    /// The ids of the connections (REST streams excluded) with this uid and in this namespace (nil:
    /// any), unordered. Builds no snapshot: a page of a listing of 100,000 connections snapshots
    /// only its own rows (`connectionSnapshot`).
    public func connectionIDs(uid: String?, namespace: String?) -> [ConnectionID] {
        var ids: [ConnectionID] = []
        ids.reserveCapacity(uid == nil && namespace == nil ? connections.count : 0)
        for (id, connection) in connections {
            if let uid, connection.credentials.uid != uid { continue }
            if let namespace, connection.namespace != namespace { continue }
            if connection.sessionID.hasPrefix("stream-") { continue }
            ids.append(id)
        }
        return ids
    }

    public func connectionSnapshot(_ id: ConnectionID) -> ConnectionSnapshot? {
        connections[id].map(snapshot)
    }

    private func snapshot(_ connection: Connection) -> ConnectionSnapshot {
        let auth: String = switch connection.credentials {
        case .admin: "admin"
        case .unauthenticated: "anonymous"
        case .user: "user"
        }
        return ConnectionSnapshot(
            id: connection.id, session: connection.sessionID, namespace: connection.namespace,
            uid: connection.credentials.uid, auth: auth, sdk: connection.sdk,
            listeners: connection.listens.count, onDisconnectOps: connection.onDisconnect.count,
            isStream: connection.sessionID.hasPrefix("stream-"))
    }

    public func heldSnapshots() -> [HeldSnapshot] {
        held.values.sorted { $0.runAt < $1.runAt }.map { entry in
            HeldSnapshot(session: entry.sessionID, namespace: entry.namespace,
                         uid: entry.identity.hasPrefix("uid:") ? String(entry.identity.dropFirst(4)) : nil,
                         disconnectedAt: entry.disconnectedAt, runAt: entry.runAt, ops: entry.queue.ops)
        }
    }

    public func connectionID(forSession session: String) -> ConnectionID? { sessions[session] }

    public var namespaceNames: [String] { namespaces.keys.sorted() }
}
