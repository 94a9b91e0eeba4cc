/// Replicated mode, the applying side: every node applies every revision of a namespace's log in
/// order, deterministically. A proposal is validated against the version window: valid entries
/// commit exactly as written (tree, online index, pushes to local listeners, limit usage, rules,
/// held ops they supersede here), the others abort alike on every node. The proposer answers its
/// client when it applies its own entry, after the pushes.
extension Engine {
    /// Applies revision `revision.rev` of namespace `name`, which must be the next one. On a
    /// thrown error nothing changed: the shell must not skip the revision.
    public func apply(_ revision: LogRevision, namespace name: String, now: Int64) throws(ApplyError) {
        guard let node = configuration.replication?.node, let ns = namespaces[name], let replica = ns.replica else {
            throw .notFollowed(name)
        }
        let expected = replica.applied + 1
        guard revision.rev == expected else { throw .outOfOrder(expected: expected, got: revision.rev) }
        switch revision.body {
        case .proposal(let bytes):
            let entry: LogEntry
            do {
                entry = try LogEntry(decoding: bytes)
            } catch .unsupportedVersion(let version) {
                throw .unsupported("entry format version \(version)")
            } catch {
                // Every node reads the same bytes the same way: an entry nobody can read aborts.
                notices.append("namespace \(name): revision \(revision.rev) from \(revision.node) is not a valid entry (\(error)); it is skipped on every node")
                return recordRevision([], rev: revision.rev, in: replica)
            }
            guard entry.namespace == name else {
                notices.append("namespace \(name): revision \(revision.rev) names namespace \(entry.namespace); skipped")
                return recordRevision([], rev: revision.rev, in: replica)
            }
            switch replica.window.validate(entry.readSet, base: entry.base) {
            case .valid:
                commitEntry(entry, rev: revision.rev, in: ns, now: now)
            case .conflict, .outOfWindow:
                recordRevision([], rev: revision.rev, in: replica)
                if let origin = entry.origin, origin.node == node { resolve(origin.request, .aborted(entry.onAbort), now: now) }
            case .missingHistory:
                throw .missingHistory(rev: revision.rev, base: entry.base)
            }
        case .nodeDead(let dead, _):
            recordRevision([], rev: revision.rev, in: replica)
            if dead == node { clusterEffects.append(.declaredDead(namespace: name, rev: revision.rev)) }
        case .nodeLeft:
            recordRevision([], rev: revision.rev, in: replica)
        case let .takeover(session, from):
            recordRevision([], rev: revision.rev, in: replica)
            if from == node, revision.node != node { sessionMovedAway(session, in: ns, now: now) }
        case .unknown(let kind):
            throw .unsupported("log entry kind \(kind)")
        }
        passBarriers(in: ns, now: now)
    }

    private func recordRevision(_ writes: [WrittenPath], rev: UInt64, in replica: ReplicaState) {
        // `apply` checked the order: recording cannot fail.
        try? replica.window.record(writes, rev: rev)
    }

    /// A valid entry, applied exactly as written.
    private func commitEntry(_ entry: LogEntry, rev: UInt64, in ns: Namespace, now: Int64) {
        let mine = entry.origin.flatMap { $0.node == configuration.replication?.node ? $0 : nil }
        let step = mine.flatMap { pending[$0.request] }
        let writes = entry.writes.map { ($0.path, $0.value) }
        var written: [WrittenPath] = []
        switch entry.kind {
        case .write:
            written = commitWrite(writes, in: ns, identity: entry.identity, label: step?.label ?? "replicated",
                                  recordingWritten: true, writtenBy: entry.session, now: now)
        case .runHeld(let session):
            if !writes.isEmpty {
                written = commit(writes, in: ns, recordingWritten: true)
                counters.writes["ondisconnect", default: 0] += 1
                if mine != nil { counters.onDisconnectOpsRun += writes.count }
            }
            heldRunCommitted(session, in: ns, now: now)
        case .setRules(let document):
            installRules(document, in: ns, now: now)
        case .limitUsage:
            break
        }
        for change in entry.limitUsage {
            store(change.usage ?? .unused, for: LimitUsageKey(namespace: ns.name, limit: change.limit, uid: change.uid))
        }
        if let replica = ns.replica { recordRevision(written + entry.virtualWrites, rev: rev, in: replica) }
        if let mine { resolve(mine.request, .committed, now: now) }
    }

    /// The rules document in force for a namespace from now on (nil: the default rules again).
    /// One node calls it for `setRules`; replicated, every node at the entry's revision.
    func installRules(_ document: String?, in ns: Namespace, now: Int64, parsed: RuleSet? = nil) {
        if let document {
            let rules: RuleSet
            if let parsed {
                rules = parsed
            } else {
                do { rules = try RuleSet.load(text: document, source: "rules of \(ns.name) in the log") } catch {
                    // The proposer checked them: only another version of the rules language fails here.
                    notices.append("namespace \(ns.name): rules in the log do not load here (\(error)); the previous rules stay")
                    return
                }
            }
            ns.ownRules = rules
            ns.ownRulesText = document
            ns.policy = rules
        } else {
            ns.ownRules = nil
            ns.ownRulesText = nil
            ns.policy = defaultPolicy
        }
        noteHoldsData(ns)
        record(.setRules(namespace: ns.name, document: document))
        // Only this namespace's connections with listens are put in order (a PUT of one namespace's
        // rules used to sort every connection of the server).
        let affected = connections.filter { $0.value.namespace == ns.name && $0.value.listens.count > 0 }.keys.sorted()
        for id in affected { revokeUnreadableListens(id, now: now) }
    }

    // MARK: Following a namespace

    /// The replica of `namespace` is loaded and has applied the log up to the head it read: its
    /// requests are evaluated from now on (those that waited, in order).
    public func caughtUp(namespace name: String, now: Int64) {
        guard let ns = namespaces[name], let replica = ns.replica, !replica.serving else { return }
        replica.serving = true
        let waiting = pipelines.filter { $0.value.blocker == .loading && connections[$0.key]?.namespace == name }.keys.sorted()
        for id in waiting { unblock(id, now: now) }
        runWaitingDirect(namespace: name, now: now)
        // Loaded for nothing that stays (a preload, a client gone meanwhile): idle from now.
        if let ns = namespaces[name], ns.holdsData, isUnused(ns) { noteIdleReplica(ns, now: now) }
    }

    /// The last revision applied to a namespace's replica (nil: not followed).
    public func appliedRevision(namespace name: String) -> UInt64? { namespaces[name]?.replica?.applied }

    // MARK: Read barrier

    /// The log's head revision for a read barrier (`ClusterEffect.readBarrier`), or nil when it
    /// could not be read: the `g` is then served from the replica as it is.
    public func headRevision(_ id: UInt64, rev: UInt64?, now: Int64) {
        guard let step = pending[id], let ns = namespaces[step.namespace], let replica = ns.replica else { return }
        guard let rev, rev > replica.applied else { return resolve(id, .committed, now: now) }
        replica.barriers.append((rev, id))
    }

    private func passBarriers(in ns: Namespace, now: Int64) {
        guard let replica = ns.replica, !replica.barriers.isEmpty else { return }
        let applied = replica.applied
        let passed = replica.barriers.filter { $0.rev <= applied }
        guard !passed.isEmpty else { return }
        replica.barriers.removeAll { $0.rev <= applied }
        for barrier in passed { resolve(barrier.step, .committed, now: now) }
    }
}
