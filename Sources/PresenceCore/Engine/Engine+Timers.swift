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
    /// A token expiry to act on: tracked apart from the grace windows, so that a tick for a grace
    /// window does not sort and scan every connection (it did, at each of up to ~1,000 deadlines
    /// per second under churn).
    func scheduleTokenExpiry(_ time: Int64) {
        if nextTokenExpiry.map({ time < $0 }) ?? true { nextTokenExpiry = time }
        scheduleDeadline(time)
    }

    public func tick(now: Int64) {
        guard let earliest = earliestDeadline, earliest <= now else { return }
        earliestDeadline = nil
        if let next = runDueHeldOps(now: now) { scheduleDeadline(next) }
        expireDirectWaits(now: now)
        if let next = unfollowIdleReplicas(now: now) { scheduleDeadline(next) }
        // No token can have expired before the earliest expiry scheduled (it may be stale-early).
        guard let expiry = nextTokenExpiry else { return }
        guard expiry <= now else {
            scheduleDeadline(expiry)
            return
        }
        nextTokenExpiry = nil
        // One pass without sorting (it runs at every expiry, and every connection's token expires
        // once an hour); only the expired ones are put in order.
        var expired: [ConnectionID] = []
        for (id, connection) in connections {
            guard case .user(_, let expiresAt?) = connection.credentials else { continue }
            if expiresAt <= now { expired.append(id) } else { scheduleTokenExpiry(expiresAt) }
        }
        for id in expired.sorted() {
            connections[id]?.credentials = .unauthenticated
            emit(.authRevoked(.expiredToken("Auth token is expired.")), to: id)
            revokeUnreadableListens(id, now: now, authChanged: true)
        }
    }
}
