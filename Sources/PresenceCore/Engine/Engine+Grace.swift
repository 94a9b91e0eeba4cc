/// The disconnect grace window: a server-side debounce so a client that drops and comes straight
/// back (a phone switching networks, an app backgrounded for a second) shows no offline flap.
extension Engine {
    /// Held ops of a session are dropped: its client came back in time.
    func cancelHeld(session: String) {
        if held.removeValue(forKey: session) != nil { record(.removeSession(sessionID: session)) }
    }

    /// A write by `credentials` supersedes that identity's held ops at or below the written paths:
    /// the client is evidently back, so writing "offline" there later would be a flap.
    func supersedeHeld(by paths: [Path], credentials: Credentials, namespace: String) {
        guard !held.isEmpty else { return }
        let identity = credentials.identity
        for (session, entry) in held where entry.identity == identity && entry.namespace == namespace {
            var queue = entry.queue
            for path in paths { queue.cancel(path) }
            if queue.isEmpty {
                held.removeValue(forKey: session)
                record(.removeSession(sessionID: session))
            } else if queue != entry.queue {
                held[session]?.queue = queue
                if let updated = held[session] { recordHeld(updated) }
            }
        }
    }

    /// Runs the held ops whose window has ended, oldest first; returns the next window end.
    func runDueHeldOps(now: Int64) -> Int64? {
        var next: Int64?
        let due = held.values.filter { $0.runAt <= now }.sorted { ($0.runAt, $0.sessionID) < ($1.runAt, $1.sessionID) }
        for entry in due {
            held.removeValue(forKey: entry.sessionID)
            runOnDisconnect(entry.queue, in: namespace(entry.namespace), timestamp: entry.disconnectedAt, now: now)
            record(.removeSession(sessionID: entry.sessionID))
        }
        for entry in held.values { next = min(next ?? entry.runAt, entry.runAt) }
        return next
    }

    /// Sessions whose ops are held, for operators and tests.
    public var heldSessionCount: Int { held.count }
}
