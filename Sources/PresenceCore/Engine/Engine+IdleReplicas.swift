/// Replicated mode: a namespace that holds data is followed while this node uses it, and for
/// `ReplicationConfiguration.unfollowIdleMilliseconds` after that. Then its replica is dropped and
/// the node stops following its log, so a node that once served thousands of namespaces does not
/// tail, beat and snapshot all of them forever (docs/scaling.md, "Idle namespaces"). A client that
/// names it again loads it afresh (snapshot, then the log), as at start: the log is the truth, so
/// nothing is lost by forgetting the replica.
extension Engine {
    /// Nothing on this node uses `ns`: no connection or stream, no listener, no held ops, no step
    /// or request waiting for the log or for the namespace to load.
    func isUnused(_ ns: Namespace) -> Bool {
        ns.connectionCount == 0 && ns.listeners.count == 0 && held.count(inNamespace: ns.name) == 0
            && (ns.replica?.pendingSteps ?? 0) == 0
    }

    /// `ns` holds data and is unused since `now`: it is let go once it stays so for the period.
    /// Called whenever a use of it ends, so the period counts from the last one.
    func noteIdleReplica(_ ns: Namespace, now: Int64) {
        guard let replica = ns.replica, let period = configuration.replication?.unfollowIdleMilliseconds else { return }
        replica.idleSince = now
        idleReplicas.note(ns.name, since: now)
        scheduleDeadline(now + period)
    }

    /// In `tick`: lets go of the namespaces unused for the whole period. Returns when the next
    /// candidate falls due.
    func unfollowIdleReplicas(now: Int64) -> Int64? {
        guard let period = configuration.replication?.unfollowIdleMilliseconds else { return nil }
        for (name, since) in idleReplicas.takeIdle(since: now - period) {
            // Used again since (and perhaps idle again: then a later entry stands for it).
            guard let ns = namespaces[name], let replica = ns.replica, replica.idleSince == since else { continue }
            guard isUnused(ns) else {
                replica.idleSince = nil
                continue
            }
            forget(ns)
        }
        return idleReplicas.oldestSince.map { $0 + period }
    }

    /// Removes `ns` from memory. Replicated, the node stops following its log and drops what it
    /// knew from it (its limit usage), since following it again replays that from the snapshot
    /// and the log; on one node the usage stays, as it is the only copy.
    func forget(_ ns: Namespace) {
        namespaces.removeValue(forKey: ns.name)
        if ns.countedAsHoldingData {
            ns.countedAsHoldingData = false
            namespacesHoldingData -= 1
            if namespacesHoldingData < configuration.limits.maxNamespaces { namespaceCapLogged = false }
        }
        guard ns.replica != nil else { return }
        for key in limitUsage.keys where key.namespace == ns.name { limitUsage[key] = nil }
        clusterEffects.append(.unfollow(namespace: ns.name))
    }

    /// Namespaces whose replica is in memory (followed), for operators and tests.
    public var followedNamespaceCount: Int { namespaces.values.filter { $0.replica != nil }.count }
}
