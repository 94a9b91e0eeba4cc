/// The engine's state for one client connection.
struct Connection {
    let id: ConnectionID
    let namespace: String
    let sessionID: String
    var credentials: Credentials = .unauthenticated
    /// Active listens by (path, query identity).
    var listens = ListenTable()
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
    /// The raw query and spec of a listen with a query; nil for the plain listen (nearly all of
    /// them), which keeps this record small.
    private let filtered: FilteredListen?

    /// The query as the client sent it, echoed in a `c` revocation (clients rebuild its identity).
    var rawQuery: JSON? { filtered?.rawQuery }
    var spec: QuerySpec { filtered?.spec ?? .default }

    init(listener: Listener, rawQuery: JSON?, spec: QuerySpec) {
        self.listener = listener
        self.filtered = rawQuery == nil && spec.isDefault ? nil : FilteredListen(rawQuery: rawQuery, spec: spec)
    }
}

final class FilteredListen: Sendable {
    let rawQuery: JSON?
    let spec: QuerySpec
    init(rawQuery: JSON?, spec: QuerySpec) {
        self.rawQuery = rawQuery
        self.spec = spec
    }
}

/// A connection's listens by key. Almost every connection has a handful, so they are kept in a
/// small array (one allocation of ~100 bytes for one listen, against ~700 for a dictionary of
/// these records); past `maxLinear` a dictionary indexes them.
struct ListenTable {
    private static let maxLinear = 16
    private var entries: [(key: ListenKey, value: Listen)] = []
    private var index: [ListenKey: Int]?

    var count: Int { entries.count }
    var values: [Listen] { entries.map(\.value) }

    private func position(of key: ListenKey) -> Int? {
        if let index { return index[key] }
        return entries.firstIndex { $0.key == key }
    }

    subscript(key: ListenKey) -> Listen? {
        get { position(of: key).map { entries[$0].value } }
        set {
            if let newValue {
                if let at = position(of: key) {
                    entries[at].value = newValue
                } else {
                    entries.append((key, newValue))
                    if index != nil {
                        index![key] = entries.count - 1
                    } else if entries.count > ListenTable.maxLinear {
                        reindex()
                    }
                }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: ListenKey) -> Listen? {
        guard let at = position(of: key) else { return nil }
        let removed = entries.remove(at: at).value
        if entries.isEmpty {
            entries = []
            index = nil
        } else if index != nil {
            if entries.count > ListenTable.maxLinear { reindex() } else { index = nil }
        }
        return removed
    }

    private mutating func reindex() {
        var map: [ListenKey: Int] = [:]
        map.reserveCapacity(entries.count)
        for (position, entry) in entries.enumerated() { map[entry.key] = position }
        index = map
    }

    /// The listens in (path, query identity) order.
    func sorted() -> [(key: ListenKey, value: Listen)] {
        entries.sorted { ($0.key.path, $0.key.queryIdentity) < ($1.key.path, $1.key.queryIdentity) }
    }
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
