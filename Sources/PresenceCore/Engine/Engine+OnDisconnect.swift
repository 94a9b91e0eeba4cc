/// onDisconnect ops of live connections: registration (rules, per-connection limits), cancel,
/// running them, and journalling what changed.
extension Engine {
    /// `o` / `om`: check the write rules now (placeholders resolved as of now) and store the ops,
    /// within the connection's limits (`EngineLimits.maxOnDisconnectOps` / `maxOnDisconnectBytes`).
    /// nil (replicated): the ops are stored in the session store first; answered when it has them.
    func registerOnDisconnect(_ id: ConnectionID, path: Path, updates: [Request.Update], isMerge: Bool, now: Int64) -> Result<Void, EngineError>? {
        guard let connection = connections[id] else { return .failure(.unavailable("connection closed")) }
        let ns = namespace(connection.namespace)
        let writes: [(Path, Node)]
        switch prepare(updates, under: path, in: ns, now: now) {
        case .success(let prepared): writes = prepared
        case .failure(let error): return .failure(error)
        }
        guard mayWrite(writes, credentials: connection.credentials, in: ns, now: now) else {
            return .failure(.permissionDenied)
        }
        if let refusal = storageRefusal() { return .failure(refusal) }
        if !connection.credentials.isAdmin, let refusal = namespaceCapRefusal(ns) { return .failure(refusal) }
        // The limits, on the queue as it would be: a set replaces the ops at and below its path,
        // so re-registering the same op never counts twice. Worked out without changing (or
        // copying) the queue; a merge whose keys overlap may be counted a few ops high or low.
        let limits = configuration.limits
        var count = connection.onDisconnect.count
        var bytes = Int(connection.onDisconnectBytes)
        for update in updates {
            let covered = connection.onDisconnect.coverage(at: path.appending(update.path))
            count += 1 - covered.count
            bytes += OnDisconnectQueue.size(of: update.value) - covered.bytes
        }
        if count > limits.maxOnDisconnectOps {
            counters.limitRefusals += 1
            return .failure(refuse(.onDisconnectOps, "this connection would hold \(count) onDisconnect ops, more than the \(limits.maxOnDisconnectOps) one connection may hold (--max-ondisconnect-ops); cancel some first", connection: connection))
        }
        if bytes > limits.maxOnDisconnectBytes {
            counters.limitRefusals += 1
            return .failure(refuse(.onDisconnectBytes, "this connection's onDisconnect ops would hold \(bytes) bytes, more than the \(limits.maxOnDisconnectBytes) one connection may hold (--max-ondisconnect-bytes)", connection: connection))
        }
        let delta: Int
        var changes: [OnDisconnectChange] = []
        if isMerge {
            delta = connection.onDisconnect.update(updates, at: path, credentials: connection.credentials)
            for update in updates {
                changes.append(.set(OnDisconnectOp(path: path.appending(update.path), value: update.value, credentials: connection.credentials)))
            }
        } else {
            delta = connection.onDisconnect.set(updates[0].value, at: path, credentials: connection.credentials)
            changes.append(.set(OnDisconnectOp(path: path, value: updates[0].value, credentials: connection.credentials)))
        }
        connection.onDisconnectBytes = UInt32(clamping: Int(connection.onDisconnectBytes) + delta)
        return recordLiveSession(connection, changes: changes) ? nil : .success(())
    }

    /// `oc`: forget the ops at and below `path`. False (replicated): answered once the session
    /// store has the change.
    func cancelOnDisconnect(_ id: ConnectionID, path: Path) -> Bool {
        guard let connection = connections[id], let delta = connection.onDisconnect.cancel(path) else { return true }
        connection.onDisconnectBytes = UInt32(clamping: Int(connection.onDisconnectBytes) + delta)
        return !recordLiveSession(connection, changes: [.cancel(path)])
    }

    /// A live connection's ops changed: store what changed. A small queue is stored whole (one
    /// record of a few ops); a large one as the change alone, stored whole again once the changes
    /// outnumber its ops, so the n-th registration costs O(1) in storage, not O(n). Replicated, the
    /// same goes to the session store, and the request's reply waits for it: returns true then.
    func recordLiveSession(_ connection: Connection, changes: [OnDisconnectChange]) -> Bool {
        let replicated = configuration.replication != nil
        guard journal != nil || replicated else { return false }
        // No local copy of the queue: it would make the next change copy a large one.
        let action: SessionCommand.Action
        if connection.onDisconnect.isEmpty {
            record(.removeSession(sessionID: connection.sessionID))
            action = .drop
        } else if connection.onDisconnect.isIndexed, !connection.onDisconnect.journalled(changes: changes.count) {
            let identity = connection.credentials.identity
            record(.changeSessionOps(sessionID: connection.sessionID, identity: identity, changes: changes))
            action = .change(identity: identity, changes: changes)
        } else {
            let session = StoredSession(sessionID: connection.sessionID, namespace: connection.namespace,
                                        identity: connection.credentials.identity, ops: connection.onDisconnect.ops)
            record(.upsertSession(session))
            action = .put(session)
        }
        guard replicated else { return false }
        storeSession(action, session: connection.sessionID, namespace: connection.namespace, awaited: true)
        return true
    }

    /// Runs a finished connection's onDisconnect ops: server values resolve to `timestamp` (when
    /// the connection ended), each op's rules are checked again at `now` with the credentials it
    /// was registered with, the ops that fail are dropped, and the rest are applied as one
    /// atomic write.
    func runOnDisconnect(_ queue: OnDisconnectQueue, in ns: Namespace, timestamp: Int64, now: Int64) {
        guard !queue.isEmpty else { return }
        let writes = checkedOnDisconnectWrites(queue, in: ns, timestamp: timestamp, now: now)
        if !writes.isEmpty {
            commit(writes, in: ns)
            counters.writes["ondisconnect", default: 0] += 1
            counters.onDisconnectOpsRun += writes.count
        }
    }

    /// The ops that pass their rules now, as writes. Replicated (a proposal being built), what
    /// decided them is recorded: each op's rule reads, and the whole subtree at each op's path, so
    /// that a write there ordered first (a client that came back through another node) aborts
    /// the run.
    func checkedOnDisconnectWrites(_ queue: OnDisconnectQueue, in ns: Namespace, timestamp: Int64, now: Int64) -> [(Path, Node)] {
        var writes: [(Path, Node)] = []
        for op in queue.ops {
            proposal?.reads.insert(op.path.last == ".priority" ? (op.path.parent ?? op.path) : op.path, .subtree)
            guard let write = try? prepare(op.value, at: op.path, in: ns, now: timestamp) else { continue }
            if mayWrite([write], credentials: op.credentials, in: ns, now: now) {
                writes.append(write)
            }
        }
        return writes
    }
}
