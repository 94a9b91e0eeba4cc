import GRDBSQLite
import PresenceCore

/// Loading: everything stored, read back in key order.
extension SQLiteStore {

    func load() throws -> StoredState {
        var names: [Int64: String] = [:]
        var rules: [String: String] = [:]
        let namespaces = try SQLiteStatement(db, "SELECT id, name, rules FROM namespaces")
        defer { namespaces.finalize() }
        while try namespaces.step() {
            let name = namespaces.text(1)
            names[namespaces.int64(0)] = name
            if namespaces.type(2) != SQLITE_NULL { rules[name] = namespaces.text(2) }
        }

        var trees: [String: Node] = [:]
        let rows = try SQLiteStatement(db, "SELECT ns, path, kind, value, priority FROM nodes ORDER BY ns, path")
        defer { rows.finalize() }
        var builder: TreeBuilder?
        var current: Int64 = 0
        while try rows.step() {
            let ns = rows.int64(0)
            if builder == nil || ns != current {
                if let finished = builder?.finish(), let name = names[current], !finished.isNull { trees[name] = finished }
                builder = TreeBuilder()
                current = ns
            }
            try builder!.add(rows)
        }
        if let finished = builder?.finish(), let name = names[current], !finished.isNull { trees[name] = finished }

        var sessions: [StoredSession] = []
        let sessionRows = try SQLiteStatement(db, "SELECT record FROM sessions ORDER BY id")
        defer { sessionRows.finalize() }
        while try sessionRows.step() {
            let text = sessionRows.text(0)
            do {
                sessions.append(try StorageCoding.session(JSONParser.parse(text)))
            } catch {
                throw SQLiteStorageError.corrupt("session record \(text): \(error)")
            }
        }

        var heartbeat: Int64?
        var sequence: UInt64?
        let meta = try SQLiteStatement(db, "SELECT key, value FROM meta")
        defer { meta.finalize() }
        while try meta.step() {
            switch meta.text(0) {
            case "heartbeat": heartbeat = meta.int64(1)
            case "sequence": sequence = UInt64(bitPattern: meta.int64(1))
            default: continue
            }
        }
        var limitUsage: [LimitUsageKey: LimitUsage] = [:]
        let usageRows = try SQLiteStatement(db, "SELECT ns, limit_name, uid, count, cooldown_started FROM limit_usage")
        defer { usageRows.finalize() }
        while try usageRows.step() {
            let key = LimitUsageKey(namespace: usageRows.text(0), limit: usageRows.text(1), uid: usageRows.text(2))
            limitUsage[key] = LimitUsage(count: Int(usageRows.int64(3)),
                                         cooldownStartedAt: usageRows.type(4) == SQLITE_NULL ? nil : usageRows.int64(4))
        }
        return StoredState(namespaces: trees, rules: rules, sessions: sessions, lastHeartbeat: heartbeat, lastSequence: sequence,
                           limitUsage: limitUsage)
    }

    func loadTree(namespace: String) throws -> Node {
        guard let ns = namespaceIDs[namespace] else { return .null }
        let rows = try SQLiteStatement(db, "SELECT ns, path, kind, value, priority FROM nodes WHERE ns = ?1 ORDER BY path")
        defer { rows.finalize() }
        rows.bind(1, int64: ns)
        var builder = TreeBuilder()
        while try rows.step() { try builder.add(rows) }
        return builder.finish()
    }
}
