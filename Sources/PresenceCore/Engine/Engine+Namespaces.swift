/// Namespaces come and go: one is created when a connection, a stream or a write names it, and
/// released from memory when nothing keeps it (no data, no rules of its own, no connection, no
/// listener, no held op), so 60,000 connections each naming a new `ns` leave nothing behind. A cap
/// (`EngineLimits.maxNamespaces`) bounds how many may hold data or rules at once: a write or an
/// onDisconnect op that would give data to one more is refused with `too_big`.
extension Engine {
    /// The namespace, created if needed.
    func namespace(_ name: String) -> Namespace {
        if let existing = namespaces[name] { return existing }
        let created = Namespace(name: name, policy: defaultPolicy)
        namespaces[name] = created
        if let replication = configuration.replication {
            // Replicated, a namespace is a replica of its log: it serves once it has caught up.
            created.replica = ReplicaState(window: VersionWindow(capacity: replication.windowCapacity))
            clusterEffects.append(.follow(namespace: name))
        }
        return created
    }

    /// The namespace for a read: an unknown one is answered from an empty stand-in that is not
    /// kept, so reading a made-up namespace creates nothing.
    func existingNamespace(_ name: String) -> Namespace {
        namespaces[name] ?? Namespace(name: name, policy: defaultPolicy)
    }

    /// Counts a change in whether `ns` holds data (after a commit, a rules change, a restore).
    func noteHoldsData(_ ns: Namespace) {
        let holds = ns.holdsData
        guard holds != ns.countedAsHoldingData else { return }
        ns.countedAsHoldingData = holds
        namespacesHoldingData += holds ? 1 : -1
        if namespacesHoldingData < configuration.limits.maxNamespaces { namespaceCapLogged = false }
    }

    /// Forgets `ns` when nothing keeps it in memory. Replicated, a namespace that holds data is
    /// forgotten too once it stays unused for a while (`Engine+IdleReplicas`), counted from `now`
    /// (nil: from the last time a use of it ended with a time at hand).
    func releaseIfIdle(_ ns: Namespace, now: Int64?) {
        guard isUnused(ns), namespaces[ns.name] === ns else { return }
        guard ns.holdsData else { return forget(ns) }
        if let now { noteIdleReplica(ns, now: now) }
    }

    /// The refusal for giving data to one more namespace past the cap, or nil. Logged once each
    /// time the cap is reached.
    func namespaceCapRefusal(_ ns: Namespace) -> EngineError? {
        let cap = configuration.limits.maxNamespaces
        guard !ns.holdsData, namespacesHoldingData >= cap else { return nil }
        counters.limitRefusals += 1
        let message = "the server already holds data in \(cap) namespaces, the most it may hold (--max-namespaces); namespace \(ns.name) holds none, so nothing can be written there"
        if !namespaceCapLogged {
            namespaceCapLogged = true
            notices.append("write to namespace \(ns.name) refused: \(message); further refusals are not logged until the count drops below the cap")
        }
        return .tooBig(message)
    }

    /// Namespaces that hold data or rules now (for operators and tests).
    public var namespacesWithData: Int { namespacesHoldingData }
}
