/// Durability: the engine records every change it applies, in order, as `StorageMutation`s. The
/// shell takes them after each step (`takeJournal`), hands them to the storage thread (group
/// commit), and releases the step's acknowledgements once the storage says they are durable.
extension Engine {
    /// Starts recording changes for storage. Without it the engine keeps nothing but memory.
    public func enableJournal() {
        if journal == nil { journal = StorageBatch() }
    }

    /// The changes since the last call, numbered in the engine's one order; nil when none.
    public func takeJournal() -> StorageBatch? {
        guard var batch = journal, !batch.isEmpty else { return nil }
        journalSequence += 1
        batch.sequence = journalSequence
        journal = StorageBatch()
        return batch
    }

    /// The shell's storage thread cannot commit (a full disk, an I/O error it retries): until it
    /// says storage is back (nil), client writes and onDisconnect registrations are refused with
    /// `unavailable` (clients retry later) instead of piling up changes that cannot be stored.
    /// Reads, pushes and the ops of connections that end go on; their changes wait in order.
    public func setStorageUnavailable(_ reason: String?) {
        storageUnavailable = reason
    }

    /// The refusal while storage is unavailable, or nil.
    func storageRefusal() -> EngineError? {
        storageUnavailable.map { .unavailable("storage cannot take writes now (\($0)); retry later") }
    }

    /// The number of the last batch handed out by `takeJournal`.
    public var lastJournalSequence: UInt64 { journalSequence }

    func record(_ mutation: StorageMutation) {
        journal?.mutations.append(mutation)
    }

    func recordHeld(_ entry: HeldOps) {
        record(.upsertSession(StoredSession(
            sessionID: entry.sessionID, namespace: entry.namespace, identity: entry.identity,
            ops: entry.queue.ops, disconnectedAt: entry.disconnectedAt, runAt: entry.runAt)))
    }

    /// Loads what storage kept, before any connection is accepted. Sessions of the previous run
    /// that were still live count as disconnected at its last heartbeat (a crash, or a stop that
    /// could not say goodbye); every stored session's ops are held for the grace window from now,
    /// so clients that come back in time cancel them and the others go offline with the `lastSeen`
    /// of when they were last known to be there. Returns the namespaces whose rules did not load.
    @discardableResult
    public func restore(_ state: StoredState, now: Int64) -> [(namespace: String, error: String)] {
        for (name, tree) in state.namespaces {
            let ns = namespace(name)
            ns.root = tree
            noteHoldsData(ns)
            // The one scan: rebuild who is online from the stored tree.
            if let online = configuration.onlineIndex { ns.onlineIndex.update(after: .root, root: tree, configuration: online) }
        }
        var failures: [(String, String)] = []
        for (name, text) in state.rules.sorted(by: { $0.key < $1.key }) {
            do {
                let rules = try RuleSet.load(text: text, source: "stored rules of \(name)")
                let ns = namespace(name)
                ns.ownRules = rules
                ns.ownRulesText = text
                ns.policy = rules
                noteHoldsData(ns)
            } catch {
                failures.append((name, error.description))
            }
        }
        limitUsage = state.limitUsage
        let grace = configuration.disconnectGraceMilliseconds
        for session in state.sessions where !session.ops.isEmpty {
            let disconnectedAt = min(session.disconnectedAt ?? state.lastHeartbeat ?? now, now)
            let entry = HeldOps(
                sessionID: session.sessionID, namespace: session.namespace, identity: session.identity,
                queue: OnDisconnectQueue(restoring: session.ops), disconnectedAt: disconnectedAt,
                runAt: max(session.runAt ?? 0, now + grace))
            held[session.sessionID] = entry
            recordHeld(entry)
            scheduleDeadline(entry.runAt)
        }
        if grace <= 0 { tick(now: now) }
        return failures
    }
}
