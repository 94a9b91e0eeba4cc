extension Engine {
    /// Resolves server values and validates one value to be written at `path`.
    func prepare(_ data: JSON, at path: Path, in ns: Namespace, now: Int64) throws(DataError) -> (Path, Node) {
        let resolved = ServerValues.containsPlaceholder(data)
            ? try ServerValues.resolve(data, at: path, now: now, current: { ns.root.node(at: $0) })
            : data
        if path.last == ".priority", let parent = path.parent {
            // A write to `x/.priority` changes only the priority of `x`.
            let priorityNode = try Node(json: resolved, at: path)
            guard priorityNode.isNull || priorityNode.leafValue.map({ if case .bool = $0 { return false } else { return true } }) == true else {
                throw DataError.invalidData(path: path.description, reason: ".priority must be a string, number or null")
            }
            let priority: Priority? = switch priorityNode.leafValue {
            case .number(let n)?: .number(n)
            case .string(let s)?: .string(s)
            default: nil
            }
            return (parent, ns.root.node(at: parent).withPriority(priority))
        }
        return (path, try Node(json: resolved, at: path))
    }

    func mayWrite(_ writes: [(Path, Node)], credentials: Credentials, in ns: Namespace, now: Int64) -> Bool {
        if credentials.isAdmin || ns.policy.allowsWrite(writes, root: ns.root, auth: credentials.rulesAuth, now: now) { return true }
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
        var writes: [(Path, Node)] = []
        do {
            for child in children {
                writes.append(try prepare(child.value, at: path.appending(child.path), in: ns, now: now))
            }
        } catch {
            return .failure(EngineError(error))
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

    /// `o` / `om`: check the write rules now (placeholders resolved as of now) and store the ops.
    func registerOnDisconnect(_ id: ConnectionID, path: Path, updates: [Request.Update], isMerge: Bool, now: Int64) -> Result<Void, EngineError> {
        guard let connection = connections[id] else { return .failure(.unavailable("connection closed")) }
        let ns = namespace(connection.namespace)
        var writes: [(Path, Node)] = []
        do {
            for update in updates {
                writes.append(try prepare(update.value, at: path.appending(update.path), in: ns, now: now))
            }
        } catch {
            return .failure(EngineError(error))
        }
        guard mayWrite(writes, credentials: connection.credentials, in: ns, now: now) else {
            return .failure(.permissionDenied)
        }
        if isMerge {
            connections[id]?.onDisconnect.update(updates, at: path, credentials: connection.credentials)
        } else {
            connections[id]?.onDisconnect.set(updates[0].value, at: path, credentials: connection.credentials)
        }
        recordLiveSession(id)
        return .success(())
    }

    /// Runs a finished connection's onDisconnect ops: server values resolve to `timestamp` (when
    /// the connection ended), each op's rules are checked again at `now` with the credentials it
    /// was registered with, the ops that fail are dropped, and the rest are applied as one
    /// atomic write.
    func runOnDisconnect(_ queue: OnDisconnectQueue, in ns: Namespace, timestamp: Int64, now: Int64) {
        guard !queue.isEmpty else { return }
        var writes: [(Path, Node)] = []
        for op in queue.ops {
            guard let write = try? prepare(op.value, at: op.path, in: ns, now: timestamp) else { continue }
            if mayWrite([write], credentials: op.credentials, in: ns, now: now) {
                writes.append(write)
            }
        }
        if !writes.isEmpty {
            commit(writes, in: ns)
            counters.writes["ondisconnect", default: 0] += 1
            counters.onDisconnectOpsRun += writes.count
        }
    }

    /// Applies writes in order and pushes the changes to every listener that can see them (§4.2).
    /// Pushes are queued before the caller's ack, so every writer sees its echo first.
    func commit(_ writes: [(Path, Node)], in ns: Namespace) {
        for (path, node) in writes {
            ns.root.set(node, at: path)
            record(.write(namespace: ns.name, path: path, value: node))
            if let online = configuration.onlineIndex { ns.onlineIndex.update(after: path, root: ns.root, configuration: online) }
        }
        let writePaths = writes.map(\.0)

        var affected: [Listener]
        if writePaths.count == 1 {
            // One path: the listeners above it and below it are disjoint and each is listed once,
            // so there is nothing to deduplicate (hashing every listener cost ~2.6k instructions).
            affected = ns.listeners.listeners(containing: writePaths[0])
            affected.append(contentsOf: ns.listeners.listeners(below: writePaths[0]))
        } else {
            affected = []
            var seen: Set<Listener> = []
            for path in writePaths {
                for listener in ns.listeners.listeners(containing: path) + ns.listeners.listeners(below: path)
                where seen.insert(listener).inserted {
                    affected.append(listener)
                }
            }
        }
        guard !affected.isEmpty else { return }

        // One message per distinct content; each encoded once by the shell.
        var order: [String] = []
        var groups: [String: (Outbound, [ConnectionID])] = [:]
        var keyByListenPath: [Path: String] = [:]
        // Listeners of one path come together from the trie: look at the previous one first.
        var previous: (path: Path, key: String)?
        for listener in affected {
            if listener.query == nil,
               let key = previous.flatMap({ $0.path == listener.path ? $0.key : nil }) ?? keyByListenPath[listener.path] {
                groups[key]!.1.append(listener.connection)
                previous = (listener.path, key)
                continue
            }
            let (key, message) = pushMessage(for: listener, writePaths: writePaths, in: ns)
            if listener.query == nil {
                keyByListenPath[listener.path] = key
                previous = (listener.path, key)
            }
            if groups[key] == nil {
                order.append(key)
                groups[key] = (message, [listener.connection])
            } else {
                groups[key]!.1.append(listener.connection)
            }
        }
        for key in order {
            let (message, recipients) = groups[key]!
            effects.append(.send(recipients, message))
        }
    }

    /// What a listener at `listenPath` receives for these writes: the whole value at the listen path
    /// when a write covers it, else the changed value below it, never data outside it.
    private func pushMessage(for listener: Listener, writePaths: [Path], in ns: Namespace) -> (String, Outbound) {
        let listenPath = listener.path
        if let query = listener.query {
            // A filtered query: recompute its whole result, so children entering or leaving the
            // window are right, and push it with the client's tag.
            let key = "t\(listener.connection.raw):\(listener.tag ?? 0):" + listenPath.wireString
            return (key, .data(path: listenPath, value: query.apply(to: ns.root.node(at: listenPath)), tag: listener.tag))
        }
        if writePaths.contains(where: { $0.contains(listenPath) }) {
            return ("d" + listenPath.wireString, .data(path: listenPath, value: ns.root.node(at: listenPath), tag: nil))
        }
        var below: [Path] = []
        for path in writePaths where listenPath.contains(path) && !below.contains(path) { below.append(path) }
        if below.count == 1 {
            return ("d" + below[0].wireString, .data(path: below[0], value: ns.root.node(at: below[0]), tag: nil))
        }
        // One merge at the deepest location that holds every change (an update's own location).
        var common = below[0].parent ?? listenPath
        for path in below.dropFirst() {
            while !common.contains(path) { common = common.parent ?? .root }
        }
        if !listenPath.contains(common) { common = listenPath }
        let changes = below.map { Outbound.Change(path: common.relative($0)!, value: ns.root.node(at: $0)) }
        return ("m" + common.wireString, .merge(path: common, changes: changes, tag: nil))
    }
}
