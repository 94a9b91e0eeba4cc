/// The engine's state for one client connection.
struct Connection {
    let id: ConnectionID
    let namespace: String
    let sessionID: String
    var credentials: Credentials = .unauthenticated
    /// Active listens by (path, query identity).
    var listens: [ListenKey: Listen] = [:]
    var onDisconnect = OnDisconnectQueue()
    /// The session this connection said it replaces (`ls`), whose held ops it may cancel once it
    /// authenticates as the same user.
    var resumedSession: String?
    /// The client SDK and version from its stats message, for operators.
    var sdk: String?
}

struct ListenKey: Hashable {
    let path: Path
    let queryIdentity: String
}

struct Listen {
    let listener: Listener
    /// The query as the client sent it, echoed in a `c` revocation (clients rebuild its identity).
    let rawQuery: JSON?
    let spec: QuerySpec
}

/// A finished connection's onDisconnect ops, held for the grace window (the server-side debounce).
struct HeldOps {
    let sessionID: String
    let namespace: String
    /// Who the connection was when it ended; only the same identity can cancel the ops.
    let identity: String
    var queue: OnDisconnectQueue
    /// Server timestamps resolve to this moment: `lastSeen` is when the user left.
    let disconnectedAt: Int64
    let runAt: Int64
}

extension Credentials {
    /// Who this is, for matching a returning client to its held ops.
    var identity: String {
        switch self {
        case .admin: return "admin"
        case .unauthenticated: return "anonymous"
        case .user: return "uid:" + (uid ?? "")
        }
    }
}
