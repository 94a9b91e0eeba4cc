extension Engine {
    /// When the shell should call `tick` next (its one timer), or nil for never.
    public var nextDeadline: Int64? { earliestDeadline }

    func scheduleDeadline(_ time: Int64) {
        if let earliest = earliestDeadline, earliest <= time { return }
        earliestDeadline = time
    }

    /// Runs what is due at `now`: held onDisconnect ops whose grace window ended; connections whose
    /// token expired get `ac` with `expired_token` and continue unauthenticated, losing the listens
    /// the rules no longer allow them (§5.2).
    public func tick(now: Int64) {
        guard let earliest = earliestDeadline, earliest <= now else { return }
        earliestDeadline = nil
        if let next = runDueHeldOps(now: now) { scheduleDeadline(next) }
        for id in connections.keys.sorted() {
            guard case .user(_, let expiresAt?) = connections[id]?.credentials else { continue }
            if expiresAt <= now {
                connections[id]?.credentials = .unauthenticated
                emit(.authRevoked(.expiredToken("Auth token is expired.")), to: id)
                revokeUnreadableListens(id, now: now)
            } else {
                scheduleDeadline(expiresAt)
            }
        }
    }
}
