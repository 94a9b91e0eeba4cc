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

        // Changes journalled for large queues since each was stored whole, replayed in order.
        let changeRows = try SQLiteStatement(db, "SELECT session, change FROM session_changes ORDER BY session, seq")
        defer { changeRows.finalize() }
        var positions: [String: Int] = [:]
        for (position, session) in sessions.enumerated() { positions[session.sessionID] = position }
        var pending: (session: String, changes: [OnDisconnectChange], identity: String)?
        func flush() {
            guard let done = pending, let position = positions[done.session] else { return }
            sessions[position].ops = StoredSession.replay(done.changes, onto: sessions[position].ops)
            sessions[position].identity = done.identity
        }
        while try changeRows.step() {
            let session = changeRows.text(0)
            let text = changeRows.text(1)
            let decoded: (identity: String, changes: [OnDisconnectChange])
            do {
                decoded = try StorageCoding.changes(JSONParser.parse(text))
            } catch {
                throw SQLiteStorageError.corrupt("changes of session \(session): \(error)")
            }
            if pending?.session != session {
                flush()
                pending = (session, [], decoded.identity)
            }
            pending!.changes += decoded.changes
            pending!.identity = decoded.identity
        }
        flush()

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
