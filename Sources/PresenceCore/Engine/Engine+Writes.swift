/// Client writes: resolve, check, count, then commit. One node commits at once; replicated, the
/// same checks record what they read and the change is proposed to the log instead (`finish`).
extension Engine {
    /// Resolves server values and validates one value to be written at `path`.
    func prepare(_ data: JSON, at path: Path, in ns: Namespace, now: Int64) throws(DataError) -> (Path, Node) {
        let resolved: JSON
        if !ServerValues.containsPlaceholder(data) {
            resolved = data
        } else if let context = proposal {
            resolved = try ServerValues.resolve(data, at: path, now: now, current: { ns.root.node(at: $0) }, recording: &context.reads)
        } else {
            resolved = try ServerValues.resolve(data, at: path, now: now, current: { ns.root.node(at: $0) })
        }
        if path.last == ".priority", let parent = path.parent {
            // A write to `x/.priority` changes only the priority of `x`. It is applied, stored and
            // pushed as that (`x/.priority` = the priority), not as a rewrite of x's whole subtree:
            // a few bytes must not cost O(size of x) in storage and pushes.
            let priorityNode = try Node(json: resolved, at: path)
            guard priorityNode.isNull || priorityNode.leafValue.map({ if case .bool = $0 { return false } else { return true } }) == true else {
                throw DataError.invalidData(path: path.description, reason: ".priority must be a string, number or null")
            }
            // What it does depends on the stored x (the rules see x with the new priority).
            proposal?.reads.insert(parent, .subtree)
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
            do { writes.append(try prepare(update.value, at: try path.appendingWithinLimits(update.path), in: ns, now: now)) } catch {
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
        let allowed: Bool
        if let context = proposal {
            allowed = ns.policy.allowsWrite(view, root: ns.root, auth: credentials.rulesAuth, now: now, recording: &context.reads)
        } else {
            allowed = ns.policy.allowsWrite(view, root: ns.root, auth: credentials.rulesAuth, now: now)
        }
        if allowed { return true }
        counters.ruleDenials["write", default: 0] += 1
        return false
    }

    /// A transaction (`p` with `h`) or REST `if-match`: the write applies only while the value at
    /// `path` is the one whose hash (or ETag) the client gives. Replicated, that value is a read
    /// of its whole subtree, and an abort answers `datastale` instead of evaluating again.
    func checkExpected(_ expected: String, at path: Path, in ns: Namespace, etag: Bool, connection: Connection? = nil) -> EngineError? {
        let current = ns.root.node(at: path)
        if let refusal = hashBudgetRefusal(current, at: path, connection: connection) { return refusal }
        if etag {
            if expected != self.etag(current, at: path, namespace: ns.name) { return .dataStale }
        } else {
            guard let hash = self.hash(current, at: path, namespace: ns.name) else {
                return .notSupported("Transactions need the server's data hash, which is not configured")
            }
            if hash != expected { return .dataStale }
        }
        proposal?.reads.insert(path, .subtree)
        proposal?.onAbort = .dataStale
        return nil
    }

    /// A hash of `node` (a transaction's, an ETag) would cover more than `--max-hash-bytes`: the
    /// `too_big` refusal; nil when it may be computed. O(budget).
    public func hashRefusal(_ node: Node, at path: Path) -> EngineError? { hashBudgetRefusal(node, at: path, connection: nil) }

    /// `hashRefusal`, logged once per connection.
    func hashBudgetRefusal(_ node: Node, at path: Path, connection: Connection?) -> EngineError? {
        guard !mayHash(node) else { return nil }
        counters.limitRefusals += 1
        let budget = configuration.limits.maxHashBytes
        return refuse(.hash, "a transaction or ETag at \(path) needs a hash of all the data there, which is larger than the \(budget) bytes "
            + "one hash may cover (--max-hash-bytes); use a narrower location, or write without one", connection: connection)
    }

    /// Whether `node` is within `--max-hash-bytes`. O(budget).
    func mayHash(_ node: Node) -> Bool { node.estimatedJSONBytes(within: configuration.limits.maxHashBytes) != nil }

    /// The REST ETag of a value (§9.3): its data hash, or `null_etag` for no data (or no digest).
    public func etag(_ node: Node) -> String {
        node.isNull ? "null_etag" : (hash(node) ?? "null_etag")
    }

    /// `etag(node)` of the value at `path` of a namespace, through `HashCache`.
    public func etag(_ node: Node, at path: Path, namespace: String) -> String {
        node.isNull ? "null_etag" : (hash(node, at: path, namespace: namespace) ?? "null_etag")
    }

    /// `p`: replace the value at `path`. nil: proposed, answered when applied.
    func put(_ id: ConnectionID, path: Path, data: JSON, hash: String?, now: Int64) -> Result<Void, EngineError>? {
        guard let connection = connections[id] else { return .failure(.unavailable("connection closed")) }
        let ns = namespace(connection.namespace)
        let write: (Path, Node)
        do { write = try prepare(data, at: path, in: ns, now: now) } catch { return .failure(EngineError(error)) }
        // The rules first, as Firebase does: a transaction's datastale answer must not tell
        // someone who may not write here whether their guess of the current value was right.
        guard mayWrite([write], credentials: connection.credentials, in: ns, now: now) else {
            return .failure(.permissionDenied)
        }
        if let hash, let refusal = checkExpected(hash, at: path, in: ns, etag: false, connection: connection) { return .failure(refusal) }
        if let refusal = useWriteLimits([write.0], credentials: connection.credentials, in: ns, now: now) { return .failure(refusal) }
        return finish([write], in: ns, credentials: connection.credentials, label: "set").map { $0.map { _ in () } }
    }

    /// `m`: replace each child path under `path`, all or nothing. nil: proposed.
    func merge(_ id: ConnectionID, path: Path, children: [Request.Update], now: Int64) -> Result<Void, EngineError>? {
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
        return finish(writes, in: ns, credentials: connection.credentials, label: "update").map { $0.map { _ in () } }
    }

    /// The last step of a client write that passed every check: one node commits it now;
    /// replicated, it is proposed (nil), and committed when the log's order reaches it.
    func finish(_ writes: [(Path, Node)], in ns: Namespace, credentials: Credentials, label: String)
        -> Result<[(Path, Node)], EngineError>?
    {
        guard proposal != nil else {
            commitWrite(writes, in: ns, identity: credentials.identity, label: label)
            return .success(writes)
        }
        if let refusal = propose(.write, writes: writes, in: ns, identity: credentials.identity, label: label) {
            return .failure(refusal)
        }
        return nil
    }

    /// A client's write, applied: the tree, pushes, then the held ops it supersedes. One node calls
    /// it when the write is checked; replicated, every node calls it at the write's revision.
    @discardableResult
    func commitWrite(_ writes: [(Path, Node)], in ns: Namespace, identity: String?, label: String,
                     recordingWritten: Bool = false, writtenBy session: String? = nil, now: Int64? = nil) -> [WrittenPath] {
        let written = commit(writes, in: ns, recordingWritten: recordingWritten)
        counters.writes[label, default: 0] += 1
        if let identity { supersedeHeld(by: writes.map(\.0), identity: identity, namespace: ns.name, except: session, now: now) }
        return written
    }
}
