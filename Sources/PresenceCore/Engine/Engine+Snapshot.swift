/// A namespace's replica at one revision: what a node that starts following loads instead of the
/// whole log (`Engine.loadReplica`), before it applies the revisions after it. With the version
/// window's history it validates every entry exactly as the nodes that applied the whole log do,
/// including entries proposed before the snapshot and ordered after it.
public struct ReplicaSnapshot: Sendable {
    public var namespace: String
    public var rev: UInt64
    public var tree: Node
    /// The namespace's own rules document (nil: the default rules).
    public var rules: String?
    public var limitUsage: [LimitUsageKey: LimitUsage]
    /// `VersionWindow.history` at `rev`.
    public var history: [(rev: UInt64, writes: [WrittenPath])]

    public init(namespace: String, rev: UInt64, tree: Node, rules: String?, limitUsage: [LimitUsageKey: LimitUsage],
                history: [(rev: UInt64, writes: [WrittenPath])]) {
        self.namespace = namespace
        self.rev = rev
        self.tree = tree
        self.rules = rules
        self.limitUsage = limitUsage
        self.history = history
    }
}

extension Engine {
    /// The replica of a followed namespace as it stands (nil: not followed, or not caught up).
    public func replicaSnapshot(namespace name: String) -> ReplicaSnapshot? {
        guard let ns = namespaces[name], let replica = ns.replica, replica.serving else { return nil }
        return ReplicaSnapshot(namespace: name, rev: replica.applied, tree: ns.root, rules: ns.ownRulesText,
                               limitUsage: limitUsage.filter { $0.key.namespace == name },
                               history: replica.window.history)
    }

    /// Starts a followed namespace, not yet caught up, from `snapshot`: the shell then applies the
    /// revisions after `snapshot.rev` and calls `caughtUp` as usual. A namespace still catching up
    /// may load a newer snapshot over what it applied (the log was trimmed past it meanwhile):
    /// nothing was served from it yet. On a thrown error nothing changed.
    public func loadReplica(_ snapshot: ReplicaSnapshot, now: Int64) throws(ApplyError) {
        guard let capacity = configuration.replication?.windowCapacity, let ns = namespaces[snapshot.namespace],
              let old = ns.replica else { throw .notFollowed(snapshot.namespace) }
        guard !old.serving else {
            throw .invalidSnapshot("namespace \(snapshot.namespace) is served already")
        }
        guard snapshot.rev >= old.applied else {
            throw .invalidSnapshot("namespace \(snapshot.namespace) has applied revision \(old.applied), past the snapshot at \(snapshot.rev)")
        }
        let window: VersionWindow
        do {
            window = try VersionWindow(capacity: capacity, head: snapshot.rev, history: snapshot.history)
        } catch {
            throw .invalidSnapshot("its history does not fit revision \(snapshot.rev) (\(error))")
        }
        let replica = ReplicaState(window: window)
        replica.pendingSteps = old.pendingSteps
        replica.barriers = old.barriers
        ns.replica = replica
        ns.root = snapshot.tree
        if let online = configuration.onlineIndex {
            ns.onlineIndex = OnlineIndex()
            ns.onlineIndex.update(after: .root, root: ns.root, configuration: online)
        }
        for key in limitUsage.keys where key.namespace == ns.name { limitUsage[key] = nil }
        for (key, usage) in snapshot.limitUsage where key.namespace == ns.name { limitUsage[key] = usage }
        installRules(snapshot.rules, in: ns, now: now)
    }
}

extension Engine {
    /// Replicated mode: follows `name` now, as a connection naming it would, so that a node can be
    /// caught up before it reports ready (`--preload`). The namespace is not pinned: like any
    /// other, it is released once nothing keeps it.
    public func preload(namespace name: String) {
        guard configuration.replication != nil else { return }
        _ = namespace(name)
    }
}
