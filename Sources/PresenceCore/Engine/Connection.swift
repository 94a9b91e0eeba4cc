/// The engine's state for one client connection.
///
/// A class: a request handler that holds the record while it changes the connection's listens or
/// ops changes them in place. (As a struct in a dictionary, a copy held by the handler made the
/// next change copy the whole listen table: O(n) per listen, 26 s for 20,000 listens.) It is also
/// smaller in the connection table (a reference per bucket instead of the whole record).
final class Connection {
    let id: ConnectionID
    let namespace: String
    let sessionID: String
    var credentials: Credentials = .unauthenticated
    /// Per-connection limits already reported to the log (`ConnectionLimits.Kind` bits); declared
    /// here, with `onDisconnectBytes`, to fill the padding after `credentials` (no extra memory).
    var limitsLogged: UInt8 = 0
    /// The onDisconnect ops' values, in `OnDisconnectQueue.size(of:)` bytes.
    var onDisconnectBytes: UInt32 = 0
    /// Active listens by (path, query identity).
    var listens = ListenTable()
    var onDisconnect = OnDisconnectQueue()
    /// The session this connection said it replaces (`ls`), whose held ops it may cancel once it
    /// authenticates as the same user.
    var resumedSession: String?
    /// The client SDK and version from its stats message, for operators.
    var sdk: String?

    init(id: ConnectionID, namespace: String, sessionID: String) {
        self.id = id
        self.namespace = namespace
        self.sessionID = sessionID
    }
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
/// these records); past `maxLinear` a dictionary indexes them. Adding, finding and removing cost
/// O(1) either way (a removal moves the last entry into the gap), so the n-th listen costs what the
/// first did. It also tells the distinct queries held at a path (`--max-queries-per-location`)
/// in O(1): counted by the index, or by a scan of at most `maxLinear` entries without one.
struct ListenTable {
    private static let maxLinear = 16
    private var entries: [(key: ListenKey, value: Listen)] = []
    private var index: Index?

    /// A large table's index. A class, so the table stays two words per connection
    /// (`ConnectionMemoryTests`); a shared one is copied before it changes.
    private final class Index {
        var positions: [ListenKey: Int] = [:]
        /// Distinct queries at each path that has any.
        var queriesAt: [Path: Int] = [:]

        func copy() -> Index {
            let copy = Index()
            copy.positions = positions
            copy.queriesAt = queriesAt
            return copy
        }
    }

    var count: Int { entries.count }
    var values: [Listen] { entries.map(\.value) }
    var all: [(key: ListenKey, value: Listen)] { entries }

    /// Distinct queries (listens keyed by a non-default query) held at `path`.
    func queries(at path: Path) -> Int {
        if let index { return index.queriesAt[path] ?? 0 }
        return entries.reduce(0) { $0 + (Self.isQuery($1.key) && $1.key.path == path ? 1 : 0) }
    }

    private static func isQuery(_ key: ListenKey) -> Bool { key.queryIdentity != QuerySpec.default.identity }

    private func position(of key: ListenKey) -> Int? {
        if let index { return index.positions[key] }
        return entries.firstIndex { $0.key == key }
    }

    private mutating func uniqueIndex() -> Index? {
        if index != nil, !isKnownUniquelyReferenced(&index) { index = index?.copy() }
        return index
    }

    subscript(key: ListenKey) -> Listen? {
        get { position(of: key).map { entries[$0].value } }
        set {
            if let newValue {
                if let at = position(of: key) {
                    entries[at].value = newValue
                } else {
                    entries.append((key, newValue))
                    if let index = uniqueIndex() {
                        index.positions[key] = entries.count - 1
                        if Self.isQuery(key) { index.queriesAt[key.path, default: 0] += 1 }
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
        let removed = entries[at].value
        let index = uniqueIndex()
        let last = entries.count - 1
        if at != last {
            entries[at] = entries[last]
            index?.positions[entries[at].key] = at
        }
        entries.removeLast()
        index?.positions.removeValue(forKey: key)
        if let index, Self.isQuery(key) {
            let held = (index.queriesAt[key.path] ?? 0) - 1
            index.queriesAt[key.path] = held > 0 ? held : nil
        }
        if entries.isEmpty {
            entries = []
            self.index = nil
        } else if index != nil, entries.count <= ListenTable.maxLinear / 2 {
            self.index = nil  // small again: the array alone (hysteresis, so add/remove at the edge stays O(1))
        }
        return removed
    }

    private mutating func reindex() {
        let built = Index()
        built.positions.reserveCapacity(entries.count)
        for (position, entry) in entries.enumerated() {
            built.positions[entry.key] = position
            if Self.isQuery(entry.key) { built.queriesAt[entry.key.path, default: 0] += 1 }
        }
        index = built
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
    /// Replicated: the run proposal in flight (the session is out of the timer's order meanwhile).
    var running: UInt64? = nil
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
