extension Engine {
    func mayRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64, query: QuerySpec = .default) -> Bool {
        if credentials.isAdmin { return true }
        let allowed = query.isDefault
            ? ns.policy.allowsRead(path, root: ns.root, auth: credentials.rulesAuth, now: now)
            : ns.policy.allowsRead(path, root: ns.root, auth: credentials.rulesAuth, now: now, query: query)
        if !allowed { counters.ruleDenials["read", default: 0] += 1 }
        return allowed
    }

    /// The query of a `q`/`g`/`n` request: nil (or `{}`) is the default, whole-location query.
    static func querySpec(_ raw: JSON?) -> Result<QuerySpec, EngineError> {
        guard let raw, !raw.isNull else { return .success(.default) }
        if case .object(let members) = raw, members.isEmpty { return .success(.default) }
        do { return .success(try QuerySpec(wire: raw)) } catch { return .failure(.invalidData(error.description)) }
    }

    /// `q`: check read rules, send the current data (filtered and tagged for a query), then the ok
    /// (§3.2: data before ok).
    func listen(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, tag: Int?, now: Int64) {
        guard let connection = connections[id] else { return }
        let spec: QuerySpec
        switch Engine.querySpec(query) {
        case .success(let parsed): spec = parsed
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        let ns = namespace(connection.namespace)
        let value: Node
        switch limitedRead(path, credentials: connection.credentials, in: ns, now: now, query: spec) {
        case .success(let read): value = read
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        let tagged = tag != nil && !spec.isDefault
        let listener = Listener(connection: id, path: path, tag: tagged ? tag : nil, query: tagged ? spec : nil)
        let key = ListenKey(path: path, queryIdentity: tagged ? spec.identity : QuerySpec.default.identity)
        if let previous = connections[id]?.listens[key] { ns.listeners.remove(previous.listener) }
        ns.listeners.add(listener)
        connections[id]?.listens[key] = Listen(listener: listener, rawQuery: tagged ? query : nil, spec: spec)
        emit(.data(path: path, value: tagged ? spec.apply(to: value) : value, tag: listener.tag), to: id)
        reply(number, .success(.emptyObject), to: id)
    }

    func unlisten(_ id: ConnectionID, path: Path, query: JSON?, tag: Int?) {
        guard let connection = connections[id], case .success(let spec) = Engine.querySpec(query) else { return }
        let key = ListenKey(path: path, queryIdentity: tag != nil && !spec.isDefault ? spec.identity : QuerySpec.default.identity)
        guard let listen = connection.listens[key] else { return }
        namespace(connection.namespace).listeners.remove(listen.listener)
        connections[id]?.listens.removeValue(forKey: key)
    }

    /// `g`: a one-shot read, filtered by its query.
    func get(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, now: Int64) {
        guard let connection = connections[id] else { return }
        let spec: QuerySpec
        switch Engine.querySpec(query) {
        case .success(let parsed): spec = parsed
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        switch limitedRead(path, credentials: connection.credentials, in: namespace(connection.namespace), now: now, query: spec) {
        case .success(let value): reply(number, .success(.node(spec.apply(to: value))), to: id)
        case .failure(let error): reply(number, .failure(error), to: id)
        }
    }

    /// Every read (`g`, listen, REST `GET`, stream) in one order of checks: the limits' status
    /// location answers without rules or uses; elsewhere the rules first, then one use of a limit
    /// guarding the location (so a read refused by the rules uses nothing), then the value.
    func limitedRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64, query: QuerySpec) -> Result<Node, EngineError> {
        if let status = limitStatusValue(at: path, credentials: credentials, in: ns, now: now) { return .success(status) }
        guard mayRead(path, credentials: credentials, in: ns, now: now, query: query) else { return .failure(.permissionDenied) }
        if let refusal = useLimit(at: path, credentials: credentials, in: ns, now: now) { return .failure(refusal) }
        return .success(value(at: path, in: ns))
    }

    /// The value a read sees: the stored data, or the online list at the online index's location.
    func value(at path: Path, in ns: Namespace) -> Node {
        if let online = configuration.onlineIndex, online.location.contains(path) {
            return ns.onlineIndex.node.node(at: online.location.relative(path)!)
        }
        return ns.root.node(at: path)
    }

    /// After an auth or rules change, listens the connection may no longer read are cancelled with `c`.
    func revokeUnreadableListens(_ id: ConnectionID, now: Int64) {
        guard let connection = connections[id] else { return }
        let ns = namespace(connection.namespace)
        let ordered = connection.listens.sorted()
        for (key, listen) in ordered where !mayRead(key.path, credentials: connection.credentials, in: ns, now: now, query: listen.spec) {
            ns.listeners.remove(listen.listener)
            connections[id]?.listens.removeValue(forKey: key)
            emit(.listenRevoked(path: key.path, query: listen.rawQuery), to: id)
        }
    }
}
