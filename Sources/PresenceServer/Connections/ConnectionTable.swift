/// The live WebSocket connections by id (the id lws keeps in each connection's per-session data;
/// the engine knows the same number as a `ConnectionID`), and how many each address holds, for the
/// per-address limits. Ids are never reused, so a stale id simply misses. Pure: no lws calls.
final class ConnectionTable {
    private var connections: [UInt64: ShellConnection] = [:]
    private var byAddress: [String: Int] = [:]
    private var lastID: UInt64 = 0
    /// Distinct User-Agent values seen (bounded), so connections share one copy.
    private var userAgents: [String: String] = [:]

    /// A fresh id for a connection or a stream (one numbering, so engine ids never collide).
    func nextID() -> UInt64 {
        lastID += 1
        return lastID
    }

    subscript(id: UInt64) -> ShellConnection? { connections[id] }

    var count: Int { connections.count }
    var all: Dictionary<UInt64, ShellConnection>.Values { connections.values }

    func liveConnections(from address: String) -> Int { byAddress[address, default: 0] }

    func insert(_ connection: ShellConnection) {
        connections[connection.id] = connection
        byAddress[connection.remote, default: 0] += 1
    }

    @discardableResult
    func remove(_ id: UInt64) -> ShellConnection? {
        guard let connection = connections.removeValue(forKey: id) else { return nil }
        if let count = byAddress[connection.remote] {
            if count <= 1 { byAddress.removeValue(forKey: connection.remote) } else { byAddress[connection.remote] = count - 1 }
        }
        return connection
    }

    /// The User-Agent shared with earlier connections that sent the same one: clients of one app
    /// send a handful of distinct values of ~100 bytes, otherwise stored once per connection.
    func intern(userAgent agent: String?) -> String? {
        guard let agent else { return nil }
        if let shared = userAgents[agent] { return shared }
        if userAgents.count < 1_000 { userAgents[agent] = agent }
        return agent
    }
}
