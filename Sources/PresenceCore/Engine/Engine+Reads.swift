extension Engine {
    /// A filtered query (one that needs a tag) — not served yet; answered with a clear error.
    static func isFiltered(_ query: JSON?, tag: Int?) -> Bool {
        if tag != nil { return true }
        guard let query, case .object(let members) = query else { return false }
        return !members.isEmpty
    }

    func mayRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64) -> Bool {
        credentials.isAdmin || ns.policy.allowsRead(path, root: ns.root, auth: credentials.rulesAuth, now: now)
    }

    /// `q`: check read rules, send the current data, then the ok (§3.2: data before ok).
    func listen(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, tag: Int?, now: Int64) {
        guard let connection = connections[id] else { return }
        if Engine.isFiltered(query, tag: tag) {
            reply(number, .failure(.notSupported("Filtered queries (limits and ranges) are not supported by this server yet")), to: id)
            return
        }
        let ns = namespace(connection.namespace)
        guard mayRead(path, credentials: connection.credentials, in: ns, now: now) else {
            reply(number, .failure(.permissionDenied), to: id)
            return
        }
        ns.listeners.add(Listener(connection: id, path: path, tag: nil))
        connections[id]?.listens.insert(path)
        emit(.data(path: path, value: ns.root.node(at: path), tag: nil), to: id)
        reply(number, .success(.emptyObject), to: id)
    }

    func unlisten(_ id: ConnectionID, path: Path, tag: Int?) {
        guard let connection = connections[id], tag == nil else { return }
        namespace(connection.namespace).listeners.remove(Listener(connection: id, path: path, tag: nil))
        connections[id]?.listens.remove(path)
    }

    /// `g`: a one-shot read.
    func get(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, now: Int64) {
        guard let connection = connections[id] else { return }
        if Engine.isFiltered(query, tag: nil) {
            reply(number, .failure(.notSupported("Filtered queries (limits and ranges) are not supported by this server yet")), to: id)
            return
        }
        let ns = namespace(connection.namespace)
        guard mayRead(path, credentials: connection.credentials, in: ns, now: now) else {
            reply(number, .failure(.permissionDenied), to: id)
            return
        }
        reply(number, .success(.node(ns.root.node(at: path))), to: id)
    }

    /// After an auth or rules change, listens the connection may no longer read are cancelled with `c`.
    func revokeUnreadableListens(_ id: ConnectionID, now: Int64) {
        guard let connection = connections[id] else { return }
        let ns = namespace(connection.namespace)
        for path in connection.listens.sorted() where !mayRead(path, credentials: connection.credentials, in: ns, now: now) {
            ns.listeners.remove(Listener(connection: id, path: path, tag: nil))
            connections[id]?.listens.remove(path)
            emit(.listenRevoked(path: path, query: nil), to: id)
        }
    }
}
