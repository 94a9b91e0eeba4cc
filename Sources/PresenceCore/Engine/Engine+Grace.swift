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
        for session in held.sessions(of: identity) {
            guard let entry = held[session], entry.namespace == namespace else { continue }
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
        for entry in held.takeDue(now: now) {
            runOnDisconnect(entry.queue, in: namespace(entry.namespace), timestamp: entry.disconnectedAt, now: now)
            record(.removeSession(sessionID: entry.sessionID))
        }
        return held.nextRunAt()
    }

    /// Sessions whose ops are held, for operators and tests.
    public var heldSessionCount: Int { held.count }
}
