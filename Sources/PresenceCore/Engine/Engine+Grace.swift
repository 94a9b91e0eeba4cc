/// The disconnect grace window: a server-side debounce so a client that drops and comes straight
/// back (a phone switching networks, an app backgrounded for a second) shows no offline flap.
extension Engine {
    /// A finished connection's ops, held from `now` for `grace` ms.
    @discardableResult
    func hold(_ connection: Connection, now: Int64, grace: Int64) -> HeldOps {
        let entry = HeldOps(
            sessionID: connection.sessionID, namespace: connection.namespace,
            identity: connection.credentials.identity, queue: connection.onDisconnect,
            disconnectedAt: now, runAt: now + grace)
        held[connection.sessionID] = entry
        counters.onDisconnectSessionsHeld += 1
        return entry
    }

    /// Held ops of a session are dropped: its client came back in time.
    func cancelHeld(session: String, now: Int64?) {
        guard let entry = held.removeValue(forKey: session) else { return }
        record(.removeSession(sessionID: session))
        storeSession(.drop, session: session, namespace: entry.namespace)
        if let ns = namespaces[entry.namespace] { releaseIfIdle(ns, now: now) }
    }

    /// A write by `credentials` supersedes that identity's held ops at or below the written paths:
    /// the client is evidently back, so writing "offline" there later would be a flap. (A priority
    /// write supersedes the ops of the node it belongs to.) The queue is edited in place and only
    /// the cancel is journalled for a large one. `except`: the session that made the write, which it
    /// never supersedes (replicated, its last writes may apply after it ended, on any node).
    func supersedeHeld(by paths: [Path], identity: String, namespace: String, except writer: String? = nil, now: Int64?) {
        guard !held.isEmpty else { return }
        let covered = paths.map { $0.last == ".priority" ? ($0.parent ?? $0) : $0 }
        for session in held.sessions(of: identity) {
            // No copy of the entry kept while its queue changes: it would copy a large queue.
            guard held[session]?.namespace == namespace, let heldIdentity = held[session]?.identity else { continue }
            if session == writer { continue }
            var cancelled: [OnDisconnectChange] = []
            let edit = held.modifyQueue(session) { queue -> (empty: Bool, indexed: Bool, fullRecordDue: Bool) in
                for path in covered where queue.cancel(path) != nil { cancelled.append(.cancel(path)) }
                let indexed = queue.isIndexed
                let due = !cancelled.isEmpty && indexed && queue.journalled(changes: cancelled.count)
                return (queue.isEmpty, indexed, due)
            }
            guard let edit, !cancelled.isEmpty else { continue }
            if edit.empty {
                cancelHeld(session: session, now: now)
                continue
            }
            if edit.indexed && !edit.fullRecordDue {
                record(.changeSessionOps(sessionID: session, identity: heldIdentity, changes: cancelled))
            } else if let updated = held[session] {
                recordHeld(updated)
            }
            storeSession(.change(identity: heldIdentity, changes: cancelled), session: session, namespace: namespace)
        }
    }

    /// Runs the held ops whose window has ended, oldest first; returns the next window end.
    func runDueHeldOps(now: Int64) -> Int64? {
        recentRuns.forget(before: now - (configuration.replication?.recentRunsMilliseconds ?? 0))
        for entry in held.takeDue(now: now) {
            if configuration.replication != nil {
                // Stays held (a returning client may still cancel it) while its run is proposed.
                held[entry.sessionID] = entry
                startRun(entry.sessionID, attempt: 0, now: now)
                continue
            }
            let ns = namespace(entry.namespace)
            runOnDisconnect(entry.queue, in: ns, timestamp: entry.disconnectedAt, now: now)
            record(.removeSession(sessionID: entry.sessionID))
            releaseIfIdle(ns, now: now)
        }
        return held.nextRunAt()
    }

    /// Sessions whose ops are held, for operators and tests.
    public var heldSessionCount: Int { held.count }
}
