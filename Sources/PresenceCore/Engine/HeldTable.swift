/// The onDisconnect ops held in their grace window, by session, indexed so that neither the grace
/// timer nor a write has to look at every held session.
///
/// Under churn (2,000 drops/s with the default 3 s window, ~6,000 sessions held) the timer used to
/// filter every held session on each deadline (about one per millisecond) and every write scanned
/// them all for its identity; both were O(held) and showed up as offline latency past the window.
/// Here:
/// - `order` keeps (runAt, session) sorted by runAt; with one grace window for everybody an entry
///   is simply appended (restored sessions are inserted in place). Pairs whose session is gone or
///   was held again are skipped lazily.
/// - `sessionsByIdentity` finds the sessions one identity holds.
struct HeldTable: Sequence {
    private var entries: [String: HeldOps] = [:]
    private var order: [(runAt: Int64, session: String)] = []
    private var head = 0
    private var sessionsByIdentity: [String: [String]] = [:]
    /// Held sessions per namespace: a namespace with some stays in memory.
    private var countByNamespace: [String: Int] = [:]

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    var values: Dictionary<String, HeldOps>.Values { entries.values }
    func makeIterator() -> Dictionary<String, HeldOps>.Iterator { entries.makeIterator() }

    subscript(session: String) -> HeldOps? {
        get { entries[session] }
        set {
            guard let newValue else {
                removeValue(forKey: session)
                return
            }
            let previous = entries.updateValue(newValue, forKey: session)
            if previous?.namespace != newValue.namespace {
                if let previous { uncount(previous.namespace) }
                countByNamespace[newValue.namespace, default: 0] += 1
            }
            if previous?.runAt != newValue.runAt { enqueue(newValue.runAt, session) }
            if previous?.identity != newValue.identity {
                if let previous { unindex(session, identity: previous.identity) }
                sessionsByIdentity[newValue.identity, default: []].append(session)
            }
        }
    }

    @discardableResult
    mutating func removeValue(forKey session: String) -> HeldOps? {
        guard let removed = entries.removeValue(forKey: session) else { return nil }
        unindex(session, identity: removed.identity)
        uncount(removed.namespace)
        return removed
    }

    /// Edits a held session's queue in place (no copy of a large queue); nil when not held.
    mutating func modifyQueue<R>(_ session: String, _ body: (inout OnDisconnectQueue) -> R) -> R? {
        guard entries[session] != nil else { return nil }
        return body(&entries[session]!.queue)
    }

    /// Sessions held for `namespace`.
    func count(inNamespace namespace: String) -> Int { countByNamespace[namespace] ?? 0 }

    private mutating func uncount(_ namespace: String) {
        let left = (countByNamespace[namespace] ?? 1) - 1
        countByNamespace[namespace] = left > 0 ? left : nil
    }

    /// The sessions `identity` holds ops for.
    func sessions(of identity: String) -> [String] { sessionsByIdentity[identity] ?? [] }

    /// Removes and returns the entries due at `now`, oldest first (ties by session id).
    mutating func takeDue(now: Int64) -> [HeldOps] {
        var due: [HeldOps] = []
        while head < order.count, order[head].runAt <= now {
            let (runAt, session) = order[head]
            head += 1
            if let entry = entries[session], entry.runAt == runAt, entry.running == nil {
                removeValue(forKey: session)
                due.append(entry)
            }
        }
        compact()
        return due.sorted { ($0.runAt, $0.sessionID) < ($1.runAt, $1.sessionID) }
    }

    /// The earliest window end still held.
    mutating func nextRunAt() -> Int64? {
        while head < order.count {
            let (runAt, session) = order[head]
            if let entry = entries[session], entry.runAt == runAt { return runAt }
            head += 1
        }
        compact()
        return nil
    }

    private mutating func enqueue(_ runAt: Int64, _ session: String) {
        if let last = order.last, runAt < last.runAt {
            let index = order[head...].firstIndex { $0.runAt > runAt } ?? order.count
            order.insert((runAt, session), at: index)
        } else {
            order.append((runAt, session))
        }
    }

    private mutating func unindex(_ session: String, identity: String) {
        guard var sessions = sessionsByIdentity[identity] else { return }
        sessions.removeAll { $0 == session }
        sessionsByIdentity[identity] = sessions.isEmpty ? nil : sessions
    }

    private mutating func compact() {
        if head == order.count {
            order.removeAll(keepingCapacity: order.count < 4_096)
            head = 0
        } else if head > 1_024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
