/// Replicated mode: a namespace this node cannot load for now (docs/scaling.md, "Redis down when a
/// node starts"). Requests wait for their namespace to load (`ConnectionPipeline.Blocker.loading`,
/// `DirectRequests.waiting`); when the shell's attempt to load it fails (Redis unreachable, its
/// head unreadable) they are answered `unavailable` instead of waiting as long as Redis stays away.
extension Engine {
    /// The shell's attempt to load namespace `name` failed: every request waiting for it is
    /// answered `unavailable` with `reason`, WebSocket and REST alike. Requests about the
    /// connection itself (`auth`, `unauth`, `s`, app check) need no replica and are evaluated as
    /// usual, in order, so a client that signed in meanwhile stays signed in. The namespace stays
    /// followed: the shell keeps trying, and a request that arrives later waits for the next attempt.
    public func loadFailed(namespace name: String, reason: String, now: Int64) {
        guard let ns = namespaces[name], let replica = ns.replica, !replica.serving else { return }
        let refusal = EngineError.unavailable(reason)
        let blocked = pipelines.filter { $0.value.blocker == .loading && connections[$0.key]?.namespace == name }.keys.sorted()
        for id in blocked {
            guard var pipeline = pipelines.removeValue(forKey: id) else { continue }
            while connections[id] != nil, let request = pipeline.next() {
                if Self.needsNoReplica(request.request) {
                    execute(request, from: id, now: now)
                } else {
                    reply(request.number, .failure(refusal), to: id)
                }
            }
        }
        if let waiting = direct.waiting.removeValue(forKey: name) {
            for entry in waiting {
                replica.pendingSteps -= 1
                failDirect(entry.ticket, namespace: name, entry.request, refusal, now: now)
            }
        }
        releaseIfIdle(ns, now: now)
    }

    /// Requests about the connection, not the data: answered the same whether the namespace is
    /// loaded or not.
    static func needsNoReplica(_ request: Request) -> Bool {
        switch request {
        case .stats, .appCheck, .unappCheck, .auth, .unauth: true
        default: false
        }
    }
}
