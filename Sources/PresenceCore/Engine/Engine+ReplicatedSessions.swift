/// Replicated mode, sessions: a connection's onDisconnect ops live in the session store, owned by
/// one node. When the connection ends, its owner holds them (`hold`) and at the end of the grace
/// window proposes them to the log as one `runHeld` entry, claimed for the session (SEQ checks the
/// owner), so they run once, in the log's order, on every node. A client that comes back through
/// another node takes the session over (TAKEOVER, then a `takeover` entry that tells the old owner);
/// the sessions of a dead node are adopted by a survivor (REAP) and run from there.
extension Engine {
    /// The connection ended with ops: hold them here and in the store; they run at the window's end.
    func holdReplicated(_ connection: Connection, now: Int64) {
        let grace = max(0, configuration.disconnectGraceMilliseconds)
        hold(connection, now: now, grace: grace)
        storeSession(.hold(disconnectedAt: now, runAt: now + grace), session: connection.sessionID, namespace: connection.namespace)
        if grace == 0 {
            startRun(connection.sessionID, attempt: 0, now: now)
        } else {
            scheduleDeadline(now + grace)
        }
    }

    /// Proposes the held ops of `session` (the timer found them due, or an earlier run aborted).
    func startRun(_ session: String, attempt: Int, now: Int64) {
        guard let entry = held[session] else { return }
        run(.heldRun(namespace: entry.namespace, session: session), attempt: attempt, now: now)
    }

    /// With the proposal context of a held run: the ops that pass their rules now, as one entry.
    func proposeRun(_ session: String, now: Int64) {
        guard var entry = held[session], entry.running == nil else { return }
        let ns = namespace(entry.namespace)
        guard ns.replica?.serving == true else {
            // Adopted or taken over before the namespace was loaded: try again shortly.
            return retryRun(session, at: now + 100)
        }
        let writes = checkedOnDisconnectWrites(entry.queue, in: ns, timestamp: entry.disconnectedAt, now: now)
        guard !writes.isEmpty else {
            // No op passes its rules: nothing to order.
            cancelHeld(session: session, now: now)
            return
        }
        if let refusal = propose(.runHeld(session: session), writes: writes, in: ns, identity: entry.identity,
                                 claim: .own(session), label: "ondisconnect") {
            notices.append("held ops of session \(session) cannot be proposed (\(refusal)); they are dropped")
            cancelHeld(session: session, now: now)
            return
        }
        entry.running = proposal?.step
        held[session] = entry
    }

    /// The run proposal of `session` did not commit: propose again, retry later, or let it go.
    func resolveRun(_ session: String, serial: UInt64, _ outcome: StepOutcome, now: Int64) {
        guard var entry = held[session], entry.running == serial else { return }
        switch outcome {
        case .committed:
            break // `heldRunCommitted` already forgot it.
        case .aborted:
            // Something it read changed first (the client may be back): evaluate again.
            entry.running = nil
            held[session] = entry
            startRun(session, attempt: 0, now: now)
        case .failed:
            retryRun(session, at: now + 1_000)
        case .notOwner:
            // The session moved (or its record was dropped): its ops are not ours to run.
            held.removeValue(forKey: session)
            if let ns = namespaces[entry.namespace] { releaseIfIdle(ns, now: now) }
        }
    }

    private func retryRun(_ session: String, at time: Int64) {
        guard var entry = held[session] else { return }
        entry.running = nil
        entry = HeldOps(sessionID: entry.sessionID, namespace: entry.namespace, identity: entry.identity,
                        queue: entry.queue, disconnectedAt: entry.disconnectedAt, runAt: time)
        held[session] = entry
        scheduleDeadline(time)
    }

    /// Every node, at a committed `runHeld` entry: the session's ops ran. Whoever holds them here
    /// forgets them and drops the record: its runner, or a node that took the session over or
    /// adopted it after the run was ordered but before the runner dropped the record (its own run
    /// of the same ops, if proposed, conflicts with this one and aborts). Everyone remembers the
    /// run for a while, so that such a record arriving later is dropped, not run again.
    func heldRunCommitted(_ session: String, in ns: Namespace, now: Int64) {
        recentRuns.note(session, at: now)
        guard held.removeValue(forKey: session) != nil else { return }
        storeSession(.drop, session: session, namespace: ns.name)
        releaseIfIdle(ns, now: now)
    }

    /// A `takeover` entry names this node as the session's previous owner: its connection (if still
    /// open here) is closed without running its ops, and held ops are forgotten; the new owner has them.
    func sessionMovedAway(_ session: String, in ns: Namespace, now: Int64) {
        if let id = sessions[session], let connection = connections[id] {
            effects.append(.close(id, code: .replaced, reason: "replaced by a newer connection of the same client"))
            connection.onDisconnect = OnDisconnectQueue()
            disconnect(id, now: now)
        }
        if held.removeValue(forKey: session) != nil { releaseIfIdle(ns, now: now) }
    }

    /// `open` with `ls` naming a session this node does not have: ask the store to move it here.
    func requestTakeover(_ session: String, by connection: Connection, now: Int64) {
        guard !session.isEmpty, session.utf8.count <= 256 else { return }
        connection.resumedSession = session
        awaitingTakeover[session] = connection.id
        let grace = max(0, configuration.disconnectGraceMilliseconds)
        clusterEffects.append(.session(SessionCommand(namespace: connection.namespace, session: session,
                                                      action: .takeover(now: now, graceMilliseconds: grace))))
    }

    /// The store's answer to a TAKEOVER (`SessionCommand.Action.takeover`). A session moved here is
    /// held; the connection that asked cancels it at once if it is anonymous or already signed in
    /// as the same user, else when it authenticates (`authenticate`), else it runs at `runAt`.
    public func takeoverResolved(session: String, _ result: TakeoverResult, now: Int64) {
        let waiter = awaitingTakeover.removeValue(forKey: session)
        guard case .held(let stored) = result else {
            if case .failed(let reason) = result { notices.append("takeover of session \(session) failed: \(reason)") }
            return
        }
        guard adoptHeld(stored, now: now), let waiter, let connection = connections[waiter],
              connection.resumedSession == session else { return }
        if stored.identity == Credentials.unauthenticated.identity || stored.identity == connection.credentials.identity {
            cancelHeld(session: session, now: now)
        }
    }

    /// Sessions this node adopted from dead or departed nodes (REAP's answer): held here, each
    /// running at its `runAt` with timestamps at its `disconnectedAt` (the dead node's last beat).
    public func adoptSessions(_ adopted: [StoredSession], now: Int64) {
        for session in adopted { adoptHeld(session, now: now) }
    }

    /// Holds a session that became this node's. False when there is nothing to hold.
    @discardableResult
    private func adoptHeld(_ stored: StoredSession, now: Int64) -> Bool {
        guard configuration.replication != nil else { return false }
        if recentRuns.contains(stored.sessionID) || stored.ops.isEmpty {
            // Its ops already ran (its runner had not dropped the record yet), or there are none.
            storeSession(.drop, session: stored.sessionID, namespace: stored.namespace)
            return false
        }
        _ = namespace(stored.namespace) // followed, so that the run can be evaluated
        let runAt = stored.runAt ?? now + max(0, configuration.disconnectGraceMilliseconds)
        held[stored.sessionID] = HeldOps(
            sessionID: stored.sessionID, namespace: stored.namespace, identity: stored.identity,
            queue: OnDisconnectQueue(restoring: stored.ops), disconnectedAt: min(stored.disconnectedAt ?? now, now),
            runAt: runAt)
        counters.onDisconnectSessionsHeld += 1
        scheduleDeadline(runAt)
        return true
    }
}
