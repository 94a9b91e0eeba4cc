extension Engine {
    /// Resolves server values and validates one value to be written at `path`.
    func prepare(_ data: JSON, at path: Path, in ns: Namespace, now: Int64) throws(DataError) -> (Path, Node) {
        let resolved = ServerValues.containsPlaceholder(data)
            ? try ServerValues.resolve(data, at: path, now: now, current: { ns.root.node(at: $0) })
            : data
        if path.last == ".priority", let parent = path.parent {
            // A write to `x/.priority` changes only the priority of `x`. It is applied, stored and
            // pushed as that (`x/.priority` = the priority), not as a rewrite of x's whole subtree:
            // a few bytes must not cost O(size of x) in storage and pushes.
            let priorityNode = try Node(json: resolved, at: path)
            guard priorityNode.isNull || priorityNode.leafValue.map({ if case .bool = $0 { return false } else { return true } }) == true else {
                throw DataError.invalidData(path: path.description, reason: ".priority must be a string, number or null")
            }
            // No node at x: nothing to give a priority (as the clients do).
            if ns.root.node(at: parent).isNull { return (parent, .null) }
            return (path, priorityNode)
        }
        return (path, try Node(json: resolved, at: path))
    }

    /// Prepares each update of a merge under `path`, all or nothing.
    func prepare(_ updates: [Request.Update], under path: Path, in ns: Namespace, now: Int64) -> Result<[(Path, Node)], EngineError> {
        var writes: [(Path, Node)] = []
        for update in updates {
            do { writes.append(try prepare(update.value, at: path.appending(update.path), in: ns, now: now)) } catch {
                return .failure(EngineError(error))
            }
        }
        return .success(writes)
    }

    func mayWrite(_ writes: [(Path, Node)], credentials: Credentials, in ns: Namespace, now: Int64) -> Bool {
        if credentials.isAdmin { return true }
        counters.ruleChecks += 1
        // The rules see a priority write as the new value of the node it belongs to.
        let view = writes.map { write -> (Path, Node) in
            guard write.0.last == ".priority", let parent = write.0.parent else { return write }
            return (parent, ns.root.node(at: parent).withPriority(write.1.leafValue.flatMap(Priority.init(leaf:))))
        }
        if ns.policy.allowsWrite(view, root: ns.root, auth: credentials.rulesAuth, now: now) { return true }
        counters.ruleDenials["write", default: 0] += 1
        return false
    }

    /// `p`: replace the value at `path`.
    func put(_ id: ConnectionID, path: Path, data: JSON, hash: String?, now: Int64) -> Result<Void, EngineError> {
        guard let connection = connections[id] else { return .failure(.unavailable("connection closed")) }
        let ns = namespace(connection.namespace)
        let write: (Path, Node)
        do { write = try prepare(data, at: path, in: ns, now: now) } catch { return .failure(EngineError(error)) }
        // The rules first, as Firebase does: a transaction's datastale answer must not tell
        // someone who may not write here whether their guess of the current value was right.
        guard mayWrite([write], credentials: connection.credentials, in: ns, now: now) else {
            return .failure(.permissionDenied)
        }
        if let hash, let refusal = checkTransactionHash(hash, at: path, in: ns) { return .failure(refusal) }
        if let refusal = useWriteLimits([write.0], credentials: connection.credentials, in: ns, now: now) { return .failure(refusal) }
        commit([write], in: ns)
        counters.writes["set", default: 0] += 1
        supersedeHeld(by: [write.0], credentials: connection.credentials, namespace: ns.name)
        return .success(())
    }

    /// A transaction applies only if the value is still the one the client started from (§8.4):
    /// nil when `hash` matches it, else the refusal. Callers check the write rules first.
    func checkTransactionHash(_ hash: String, at path: Path, in ns: Namespace) -> EngineError? {
        guard let current = self.hash(ns.root.node(at: path)) else {
            return .notSupported("Transactions need the server's data hash, which is not configured")
        }
        return current == hash ? nil : .dataStale
    }

    /// `m`: replace each child path under `path`, all or nothing.
    func merge(_ id: ConnectionID, path: Path, children: [Request.Update], now: Int64) -> Result<Void, EngineError> {
        guard let connection = connections[id] else { return .failure(.unavailable("connection closed")) }
        let ns = namespace(connection.namespace)
        let writes: [(Path, Node)]
        switch prepare(children, under: path, in: ns, now: now) {
        case .success(let prepared): writes = prepared
        case .failure(let error): return .failure(error)
        }
        guard mayWrite(writes, credentials: connection.credentials, in: ns, now: now) else {
            return .failure(.permissionDenied)
        }
        if let refusal = useWriteLimits(writes.map(\.0), credentials: connection.credentials, in: ns, now: now) { return .failure(refusal) }
        commit(writes, in: ns)
        counters.writes["update", default: 0] += 1
        supersedeHeld(by: writes.map(\.0), credentials: connection.credentials, namespace: ns.name)
        return .success(())
    }
}
