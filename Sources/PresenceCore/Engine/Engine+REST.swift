/// Entry points for requests that do not arrive on a WebSocket (REST, operators): the same rules,
/// the same one-order writes and the same listener pushes as wire writes.
extension Engine {
    /// A REST write, applied as one atomic write.
    public enum DirectWrite: Sendable {
        /// PUT: replace the value at the path (null deletes).
        case set(JSON)
        /// PATCH: replace each relative path under the path.
        case update([Request.Update])
    }

    /// Checks a credential from a REST request (Bearer token, `auth=` or `access_token=`).
    public func verify(credential: String, now: Int64) -> Result<Credentials, AuthError> {
        verifier.verify(credential, now: now)
    }

    /// A read. `countsAsUse`: a client's `GET`, which uses a limit guarding the location (the
    /// limits file); false for the server's own reads (a conditional write's ETag check).
    /// `shallow`: the answer will be sent as REST `shallow=true` (keys only), which is what its
    /// size budget counts. An answer over `EngineLimits.maxReadBytes` is refused with `tooBig`
    /// (REST 413), saying how to read the data in parts.
    public func read(_ path: Path, namespace name: String, credentials: Credentials, now: Int64,
                     query: QuerySpec = .default, countsAsUse: Bool = false, shallow: Bool = false, hashed: Bool = false) -> Result<Node, EngineError> {
        if let refusal = replicaRefusal(name) { return .failure(refusal) }
        let ns = existingNamespace(name)
        return limitedRead(path, credentials: credentials, in: ns, now: now, query: query, filtered: true,
                           shape: shallow ? .shallow : .full, countsAsUse: countsAsUse, hashed: hashed)
    }

    /// Applies a write and returns the written values as stored (server values resolved).
    /// `ifMatch` makes it conditional (`if-match`): it applies only while the ETag of the value at
    /// `ifMatch.path` is `ifMatch.etag`, else `dataStale`. The rules are checked first, so someone
    /// who may not write learns nothing about the current value from the answer.
    public func write(_ operation: DirectWrite, at path: Path, namespace name: String, credentials: Credentials, now: Int64,
                      ifMatch: (path: Path, etag: String)? = nil)
        -> Result<[(Path, Node)], EngineError>
    {
        // Replicated, a write goes through the log: `submitWrite` answers it when it committed.
        if configuration.replication != nil { return .failure(.unavailable("a replicated node answers REST writes through submitWrite")) }
        let ns = namespace(name)
        defer { releaseIfIdle(ns, now: now) }
        // A single node commits at once: there is always a result.
        return checkedWrite(operation, at: path, in: ns, credentials: credentials, now: now, ifMatch: ifMatch)
            ?? .failure(.unavailable("the write was proposed"))
    }

    /// A REST write's checks in order (values, rules, `if-match`, limits), then `finish`: one node
    /// commits it; replicated, it is proposed (nil) and answered when it commits.
    func checkedWrite(_ operation: DirectWrite, at path: Path, in ns: Namespace, credentials: Credentials, now: Int64,
                      ifMatch: (path: Path, etag: String)?) -> Result<[(Path, Node)], EngineError>? {
        let prepared: Result<[(Path, Node)], EngineError>
        switch operation {
        case .set(let json):
            do { prepared = .success([try prepare(json, at: path, in: ns, now: now)]) } catch { prepared = .failure(EngineError(error)) }
        case .update(let children):
            prepared = prepare(children, under: path, in: ns, now: now)
        }
        let writes: [(Path, Node)]
        switch prepared {
        case .success(let all): writes = all
        case .failure(let error): return .failure(error)
        }
        guard mayWrite(writes, credentials: credentials, in: ns, now: now) else { return .failure(.permissionDenied) }
        if let ifMatch, let refusal = checkExpected(ifMatch.etag, at: ifMatch.path, in: ns, etag: true) { return .failure(refusal) }
        if let refusal = useWriteLimits(writes.map(\.0), credentials: credentials, in: ns, now: now) { return .failure(refusal) }
        return finish(writes, in: ns, credentials: credentials, label: "rest")
    }
}

extension Engine {
    /// Replicated, these synchronous reads are served from the replica only while this node
    /// follows the namespace and has caught up with its log; before that the replica would answer
    /// with old data (or none), so they are refused. `submitRead` and `submitStream` wait for it.
    func replicaRefusal(_ name: String) -> EngineError? {
        guard configuration.replication != nil, namespaces[name]?.replica?.serving != true else { return nil }
        return .unavailable("this node does not serve namespace \(name) yet; retry")
    }

    /// Opens a streaming read (REST `text/event-stream`): a connection with no wire protocol that
    /// listens to one location. Its first message is the whole current value; later ones are the
    /// same pushes a WebSocket listener gets, and a `c` if the rules stop allowing the read.
    public func openStream(_ id: ConnectionID, path: Path, namespace name: String, credentials: Credentials,
                           query: QuerySpec, now: Int64) -> Result<Void, EngineError> {
        if let refusal = replicaRefusal(name) { return .failure(refusal) }
        let ns = namespace(name)
        let first: Outbound
        switch streamFirstMessage(path, credentials: credentials, in: ns, now: now, query: query) {
        case .success(let message): first = message
        case .failure(let error):
            releaseIfIdle(ns, now: now)
            return .failure(error)
        }
        let connection = Connection(id: id, namespace: name, sessionID: "stream-\(id.raw)")
        connection.credentials = credentials
        connections[id] = connection
        ns.connectionCount += 1
        attachStream(connection, path: path, query: query, first: first, in: ns)
        return .success(())
    }

    /// A stream's first message, the whole current value: its data, or (over
    /// `EngineLimits.sliceReadsOver`) the read the shell writes in slices, as a big listen's.
    func streamFirstMessage(_ path: Path, credentials: Credentials, in ns: Namespace, now: Int64,
                            query: QuerySpec) -> Result<Outbound, EngineError> {
        if let deferred = deferredRead(path, credentials: credentials, in: ns, now: now, query: query, filtered: true, form: .plain) {
            return deferred.map { .listenData(number: nil, read: $0, tag: nil) }
        }
        return limitedRead(path, credentials: credentials, in: ns, now: now, query: query, filtered: true)
            .map { .data(path: path, value: $0, tag: nil) }
    }

    /// A stream's connection starts listening: its first message is the whole current value.
    func attachStream(_ connection: Connection, path: Path, query: QuerySpec, first: Outbound, in ns: Namespace) {
        let listener = Listener(connection: connection.id, path: path, tag: nil, query: query.isDefault ? nil : query)
        connection.listens[ListenKey(path: path, queryIdentity: query.identity)] = Listen(listener: listener, rawQuery: nil, spec: query)
        if case .user(_, let expiresAt?) = connection.credentials { scheduleTokenExpiry(expiresAt) }
        ns.listeners.add(listener)
        emit(first, to: connection.id)
    }
}
