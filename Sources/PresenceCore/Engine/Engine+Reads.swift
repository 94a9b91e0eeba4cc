extension Engine {
    func mayRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64, query: QuerySpec = .default) -> Bool {
        if credentials.isAdmin { return true }
        counters.ruleChecks += 1
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
    /// (§3.2: data before ok). Within the connection's listen limit and the read budget.
    func listen(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, tag: Int?, now: Int64) {
        guard let connection = connections[id] else { return }
        let spec: QuerySpec
        switch Engine.querySpec(query) {
        case .success(let parsed): spec = parsed
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        let tagged = tag != nil && !spec.isDefault
        let key = ListenKey(path: path, queryIdentity: tagged ? spec.identity : QuerySpec.default.identity)
        let previous = connection.listens[key]
        let limit = configuration.limits.maxListensPerConnection
        if previous == nil, connection.listens.count >= limit {
            counters.limitRefusals += 1
            let error = refuse(.listens, "this connection already holds \(connection.listens.count) listens, the most one connection may hold (--max-listens-per-connection); stop listening somewhere first", connection: connection)
            return reply(number, .failure(error), to: id)
        }
        let queryLimit = configuration.limits.maxQueriesPerLocation
        if previous == nil, tagged, connection.listens.queries(at: path) >= queryLimit {
            counters.limitRefusals += 1
            let error = refuse(.queriesPerLocation, "this connection already holds \(queryLimit) distinct queries at \(ClientInput.quoted("/" + path.wireString)), the most one connection may hold at one location (--max-queries-per-location); stop one of them first", connection: connection)
            return reply(number, .failure(error), to: id)
        }
        let ns = namespace(connection.namespace)
        if let deferred = deferredRead(path, credentials: connection.credentials, in: ns, now: now, query: spec, filtered: tagged) {
            // Big: registered now, so that no write between is lost; its data follows in slices.
            switch deferred {
            case .failure(let error): return reply(number, .failure(error), to: id)
            case .success(let read):
                let listener = register(key, previous: previous, path: path, query: query, spec: spec, tagged: tagged, tag: tag,
                                        connection: connection, in: ns)
                return emit(.listenData(number: number, read: read, tag: listener.tag), to: id)
            }
        }
        let value: Node
        switch limitedRead(path, credentials: connection.credentials, in: ns, now: now, query: spec, filtered: tagged, connection: connection) {
        case .success(let read): value = read
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        if awaitsLog { return } // replicated: its limit use is proposed; it listens once that commits
        let listener = register(key, previous: previous, path: path, query: query, spec: spec, tagged: tagged, tag: tag,
                                connection: connection, in: ns)
        emit(.data(path: path, value: value, tag: listener.tag), to: id)
        reply(number, .success(.emptyObject), to: id)
    }

    private func register(_ key: ListenKey, previous: Listen?, path: Path, query: JSON?, spec: QuerySpec, tagged: Bool, tag: Int?,
                          connection: Connection, in ns: Namespace) -> Listener {
        let listener = Listener(connection: connection.id, path: path, tag: tagged ? tag : nil, query: tagged ? spec : nil)
        if let previous { ns.listeners.remove(previous.listener) }
        ns.listeners.add(listener)
        connection.listens[key] = Listen(listener: listener, rawQuery: tagged ? query : nil, spec: spec)
        return listener
    }

    /// A big listen's initial data came out over the budget (the shell found it while
    /// serializing): the listen is dropped (unless the client listened there again meanwhile),
    /// and the refusal counted and logged as `limitedRead` refusals are.
    public func refusedDeferredListen(_ id: ConnectionID, read: DeferredRead, tag: Int?, message: String) -> EngineError {
        if let connection = connections[id] {
            let key = ListenKey(path: read.path, queryIdentity: tag != nil ? read.spec.identity : QuerySpec.default.identity)
            if let listen = connection.listens[key], listen.listener.tag == tag {
                connection.listens.removeValue(forKey: key)
                namespace(connection.namespace).listeners.remove(listen.listener)
            }
        }
        return refusedDeferredRead(id, message: message)
    }

    func unlisten(_ id: ConnectionID, path: Path, query: JSON?, tag: Int?) {
        guard let connection = connections[id], case .success(let spec) = Engine.querySpec(query) else { return }
        let key = ListenKey(path: path, queryIdentity: tag != nil && !spec.isDefault ? spec.identity : QuerySpec.default.identity)
        guard let listen = connection.listens.removeValue(forKey: key) else { return }
        namespace(connection.namespace).listeners.remove(listen.listener)
    }

    /// `g`: a one-shot read, filtered by its query.
    func get(_ id: ConnectionID, number: Int?, path: Path, query: JSON?, now: Int64) {
        guard let connection = connections[id] else { return }
        let spec: QuerySpec
        switch Engine.querySpec(query) {
        case .success(let parsed): spec = parsed
        case .failure(let error): return reply(number, .failure(error), to: id)
        }
        let ns = namespace(connection.namespace)
        if let deferred = deferredRead(path, credentials: connection.credentials, in: ns, now: now, query: spec, filtered: true,
                                       countsUseAtEnd: true) {
            return reply(number, deferred.map { .deferred($0) }, to: id)
        }
        switch limitedRead(path, credentials: connection.credentials, in: ns, now: now, query: spec,
                           filtered: true, connection: connection) {
        case .success where awaitsLog: return // replicated: served once its limit use commits
        case .success(let value): reply(number, .success(.node(value)), to: id)
        case .failure(let error): reply(number, .failure(error), to: id)
        }
    }

    /// How a read's answer is shaped, for its size budget.
    enum ReadShape {
        case full
        /// REST `shallow=true`: the children's keys and primitive values only.
        case shallow
    }

    /// Every read (`g`, listen, REST `GET`, stream) in one order of checks: the limits' status
    /// location answers without rules or uses; elsewhere the rules first, then the size budget
    /// (`EngineLimits.maxReadBytes`), then one use of a limit guarding the location (so a read
    /// refused by the rules or the budget uses nothing), then the value. `filtered`: the answer is
    /// the query's result (a tagged listen, `g`, REST) rather than the whole location. `hashed`:
    /// the answer will be hashed (an ETag), so `--max-hash-bytes` bounds it first, and a bigger one
    /// is refused after a walk of O(that budget), not of O(`--max-read-bytes`).
    func limitedRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64, query: QuerySpec, filtered: Bool,
                     shape: ReadShape = .full, countsAsUse: Bool = true, connection: Connection? = nil,
                     hashed: Bool = false) -> Result<Node, EngineError> {
        if countsAsUse, let status = limitStatusValue(at: path, credentials: credentials, in: ns, now: now) {
            return .success(filtered ? QueryWindow.result(of: query, at: status) : status)
        }
        guard mayRead(path, credentials: credentials, in: ns, now: now, query: query) else { return .failure(.permissionDenied) }
        let stored = value(at: path, in: ns)
        let answer = filtered ? QueryWindow.result(of: query, at: stored) : stored
        if hashed, let refusal = hashBudgetRefusal(answer, at: path, connection: connection) { return .failure(refusal) }
        let budget = configuration.limits.maxReadBytes
        let size = shape == .shallow ? answer.estimatedShallowJSONBytes(within: budget) : answer.estimatedJSONBytes(within: budget)
        if size == nil {
            counters.limitRefusals += 1
            return .failure(refuse(.read, Self.tooBigMessage(path, budget: budget, shallow: shape == .shallow), connection: connection))
        }
        if countsAsUse, let refusal = useReadLimit(at: path, credentials: credentials, in: ns, now: now) { return .failure(refusal) }
        return .success(answer)
    }

    /// A read too big to answer at once (`EngineLimits.sliceReadsOver`): a `g`, a listen's data,
    /// a REST `GET`, a stream's first event. The rules are checked now and the answer is left to
    /// the shell's slices, written as `form` says. Nil when the read is answered at once: slicing
    /// is off, the answer is small (found by a walk that stops at the threshold, so O(threshold)),
    /// the limits' status location. At a location a limit guards, a use is counted only for an
    /// answer within the budget, known only at the end: with `countsUseAtEnd` (a `g`, a REST
    /// `GET` on a single node) the read is deferred and the shell counts its use once its text is
    /// made (`useDeferredReadLimit`), answering the limit's refusal instead of the text; otherwise
    /// (a listen, a stream, a replicated node, whose uses go through the log) it is answered at once.
    func deferredRead(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64, query: QuerySpec, filtered: Bool,
                      form: DeferredRead.Form = .export, countsUseAtEnd: Bool = false) -> Result<DeferredRead, EngineError>? {
        let threshold = configuration.limits.sliceReadsOver
        guard threshold > 0 else { return nil }
        var limitUse: DeferredRead.LimitUse?
        if let limits {
            if limits.statusLocation.relative(path) != nil { return nil }
            if limits.limit(guarding: path) != nil {
                guard countsUseAtEnd, configuration.replication == nil else { return nil }
                limitUse = DeferredRead.LimitUse(namespace: ns.name, credentials: credentials)
            }
        }
        let stored = value(at: path, in: ns)
        guard stored.hasChildren else { return nil }
        let small = form == .shallow ? stored.estimatedShallowJSONBytes(within: threshold) : stored.estimatedJSONBytes(within: threshold)
        guard small == nil else { return nil }
        guard mayRead(path, credentials: credentials, in: ns, now: now, query: query) else { return .failure(.permissionDenied) }
        let budget = configuration.limits.maxReadBytes
        return .success(DeferredRead(path: path, value: stored, spec: query, filtered: filtered, budget: budget,
                                     refusal: Self.tooBigMessage(path, budget: budget, shallow: form == .shallow), form: form,
                                     limitUse: limitUse))
    }

    /// A deferred read at a location a limit guards has its text, within the budget: its use is
    /// counted now. The limit's refusal (to answer instead of the text), or nil.
    public func useDeferredReadLimit(_ read: DeferredRead, now: Int64) -> EngineError? {
        guard let use = read.limitUse else { return nil }
        let ns = namespace(use.namespace)
        defer { releaseIfIdle(ns, now: now) }
        return useReadLimit(at: read.path, credentials: use.credentials, in: ns, now: now)
    }

    /// What a read over `--max-read-bytes` is refused with: what to do instead.
    static func tooBigMessage(_ path: Path, budget: Int, shallow: Bool) -> String {
        let remedy = shallow
            ? "read it in parts, with a query that has a limit (orderBy with limitToFirst or limitToLast)"
            : "read it in parts: with a query that has a limit (orderBy with limitToFirst or limitToLast), below it, or over REST with shallow=true for its keys"
        return "the data at \(path) is larger than the \(budget) bytes one read may return (--max-read-bytes); \(remedy)"
    }

    /// A deferred read came out over the budget (the shell found it while serializing): counted
    /// and logged as `limitedRead` refusals are.
    public func refusedDeferredRead(_ id: ConnectionID, message: String) -> EngineError {
        counters.limitRefusals += 1
        return refuse(.read, message, connection: connections[id])
    }

    /// The value a read sees: the stored data, or the online list at the online index's location.
    func value(at path: Path, in ns: Namespace) -> Node {
        if let online = configuration.onlineIndex, online.location.contains(path) {
            return ns.onlineIndex.node.node(at: online.location.relative(path)!)
        }
        return ns.root.node(at: path)
    }

    /// After an auth or rules change, listens the connection may no longer read are cancelled with
    /// `c` (in path order). One rule check per listen; none at all for an admin, or after a new
    /// token when the rules' reads never look at `auth` (`authChanged`).
    func revokeUnreadableListens(_ id: ConnectionID, now: Int64, authChanged: Bool = false) {
        guard let connection = connections[id], connection.listens.count > 0, !connection.credentials.isAdmin else { return }
        let ns = namespace(connection.namespace)
        if authChanged && !ns.readsDependOnAuth { return }
        var revoked: [(key: ListenKey, value: Listen)] = []
        for (key, listen) in connection.listens.all
        where !mayRead(key.path, credentials: connection.credentials, in: ns, now: now, query: listen.spec) {
            revoked.append((key, listen))
        }
        revoked.sort { ($0.key.path, $0.key.queryIdentity) < ($1.key.path, $1.key.queryIdentity) }
        for (key, listen) in revoked {
            ns.listeners.remove(listen.listener)
            connection.listens.removeValue(forKey: key)
            emit(.listenRevoked(path: key.path, query: listen.rawQuery), to: id)
        }
    }
}
