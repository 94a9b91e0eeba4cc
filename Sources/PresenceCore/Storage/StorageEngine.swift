/// The seam between the core and durable storage.
///
/// The core applies changes in one order (the order of `StorageBatch.sequence`); an engine stores
/// them and hands them back at start-up. The order could equally come from an external log (a
/// Redis stream for multi-node deployments): a batch is a self-contained, ordered list of
/// mutations, and applying the same batches in the same order to `StoredState` gives the state
/// every engine must return from `load()`.
///
/// Threading: the server calls `commit` from one dedicated storage thread, with everything that
/// accumulated during one event-loop iteration (group commit). Engines are `Sendable` so that they
/// can be created on one thread and used on another; calls must not overlap.
public protocol StorageEngine: AnyObject, Sendable {
    /// Everything committed so far: `StoredState()` applied with every committed batch in order.
    func load() throws -> StoredState

    /// The tree of one namespace (`.null` when it holds nothing). Used by export.
    func loadTree(namespace: String) throws -> Node

    /// Applies `batches` in order, atomically (all of them or none), and returns only when they
    /// are durable under the engine's durability mode. An error means none of them is stored.
    func commit(_ batches: [StorageBatch]) throws

    /// Releases the engine's resources. No call may follow.
    func close() throws

    /// Called once on the thread that will make the commits, before the first: that thread
    /// shares a core with the event loop, so a long commit should give the core back after about
    /// `microseconds` of work at a time (an engine that cannot, or whose commits are short, does nothing).
    func prepareCommitThread(yieldingEvery microseconds: UInt64)
}

extension StorageEngine {
    public func prepareCommitThread(yieldingEvery microseconds: UInt64) {}

    public func commit(_ batch: StorageBatch) throws { try commit([batch]) }

    public func loadTree(namespace: String) throws -> Node {
        try load().namespaces[namespace] ?? .null
    }
}

/// One change, as the core applied it.
public enum StorageMutation: Sendable, Equatable {
    /// `Node.set(value, at: path)` on the namespace's tree: null deletes, a trailing `.priority`
    /// key sets a priority. `value` is resolved (no server-value placeholders) and normalized
    /// (as `Node(json:)` builds it: no empty branches inside).
    case write(namespace: String, path: Path, value: Node)
    /// The rules document in force for a namespace (its source text); nil forgets it.
    case setRules(namespace: String, document: String?)
    /// Inserts a session or replaces the stored session with the same `sessionID`.
    case upsertSession(StoredSession)
    /// Edits a stored session's ops (`OnDisconnectQueue.apply` of each change, in order) and sets
    /// its identity; nothing when the session is not stored. What the core journals for a large
    /// queue instead of the whole session, so that the n-th op costs O(1) to store.
    case changeSessionOps(sessionID: String, identity: String, changes: [OnDisconnectChange])
    case removeSession(sessionID: String)
    /// The server's liveness clock (ms since the epoch), recorded every second.
    case heartbeat(Int64)
    /// One user's usage of one limit (limits file); nil forgets it (unused).
    case setLimitUsage(LimitUsageKey, LimitUsage?)
}

/// The mutations of one step of the core (one request, one timer, one disconnect), in the order
/// they were applied. `sequence` is the step's position in the core's order when it numbers them;
/// engines record the last committed one (`StoredState.lastSequence`).
public struct StorageBatch: Sendable, Equatable {
    public var sequence: UInt64?
    public var mutations: [StorageMutation]

    public init(sequence: UInt64? = nil, mutations: [StorageMutation] = []) {
        self.sequence = sequence
        self.mutations = mutations
    }

    public var isEmpty: Bool { mutations.isEmpty }

    public mutating func write(_ value: Node, at path: Path, namespace: String) {
        mutations.append(.write(namespace: namespace, path: path, value: value))
    }

    public mutating func setRules(_ document: String?, namespace: String) {
        mutations.append(.setRules(namespace: namespace, document: document))
    }

    public mutating func upsert(_ session: StoredSession) { mutations.append(.upsertSession(session)) }

    public mutating func removeSession(_ sessionID: String) { mutations.append(.removeSession(sessionID: sessionID)) }

    public mutating func heartbeat(_ time: Int64) { mutations.append(.heartbeat(time)) }
}

/// A session that may own onDisconnect ops: what must survive a restart to run them.
public struct StoredSession: Sendable, Equatable {
    public var sessionID: String
    public var namespace: String
    /// Who the session belongs to (for logs and limits); opaque to storage.
    public var identity: String
    /// The ops in the order they run; values keep their server-value placeholders and each op
    /// keeps the credentials it runs under.
    public var ops: [OnDisconnectOp]
    /// When the session ended (ms); nil = live at the last heartbeat.
    public var disconnectedAt: Int64?
    /// When the ops are due to run (ms), e.g. at the end of a grace window; nil = not scheduled.
    public var runAt: Int64?

    public init(sessionID: String, namespace: String, identity: String, ops: [OnDisconnectOp],
                disconnectedAt: Int64? = nil, runAt: Int64? = nil) {
        self.sessionID = sessionID
        self.namespace = namespace
        self.identity = identity
        self.ops = ops
        self.disconnectedAt = disconnectedAt
        self.runAt = runAt
    }
}

extension StoredSession {
    /// The ops after `changes`, as `OnDisconnectQueue` applies them.
    public static func replay(_ changes: [OnDisconnectChange], onto ops: [OnDisconnectOp]) -> [OnDisconnectOp] {
        var queue = OnDisconnectQueue(restoring: ops)
        for change in changes { queue.apply(change) }
        return queue.ops
    }
}

/// Everything an engine stores. Applying batches to it with `apply` is the reference semantics
/// that every engine must reproduce.
public struct StoredState: Sendable, Equatable {
    /// Every namespace whose tree is not null.
    public var namespaces: [String: Node]
    /// Rules documents in force, by namespace.
    public var rules: [String: String]
    /// Sessions sorted by `sessionID`.
    public var sessions: [StoredSession]
    public var lastHeartbeat: Int64?
    public var lastSequence: UInt64?
    /// Usage of limited operations, per namespace, limit and user.
    public var limitUsage: [LimitUsageKey: LimitUsage]

    public init(namespaces: [String: Node] = [:], rules: [String: String] = [:], sessions: [StoredSession] = [],
                lastHeartbeat: Int64? = nil, lastSequence: UInt64? = nil, limitUsage: [LimitUsageKey: LimitUsage] = [:]) {
        self.namespaces = namespaces.filter { !$0.value.isNull }
        self.rules = rules
        self.sessions = sessions.sorted { $0.sessionID < $1.sessionID }
        self.lastHeartbeat = lastHeartbeat
        self.lastSequence = lastSequence
        self.limitUsage = limitUsage.filter { $0.value != .unused }
    }

    public var isEmpty: Bool {
        namespaces.isEmpty && rules.isEmpty && sessions.isEmpty && lastHeartbeat == nil && lastSequence == nil
            && limitUsage.isEmpty
    }

    public mutating func apply(_ batches: [StorageBatch]) {
        for batch in batches { apply(batch) }
    }

    public mutating func apply(_ batch: StorageBatch) {
        for mutation in batch.mutations { apply(mutation) }
        if let sequence = batch.sequence { lastSequence = sequence }
    }

    public mutating func apply(_ mutation: StorageMutation) {
        switch mutation {
        case let .write(namespace, path, value):
            var tree = namespaces.removeValue(forKey: namespace) ?? .null
            tree.set(value, at: path)
            if !tree.isNull { namespaces[namespace] = tree }
        case let .setRules(namespace, document):
            rules[namespace] = document
        case .upsertSession(let session):
            let index = insertionIndex(session.sessionID)
            if index < sessions.count, sessions[index].sessionID == session.sessionID {
                sessions[index] = session
            } else {
                sessions.insert(session, at: index)
            }
        case let .changeSessionOps(sessionID, identity, changes):
            let index = insertionIndex(sessionID)
            guard index < sessions.count, sessions[index].sessionID == sessionID else { return }
            sessions[index].ops = StoredSession.replay(changes, onto: sessions[index].ops)
            sessions[index].identity = identity
        case .removeSession(let sessionID):
            let index = insertionIndex(sessionID)
            if index < sessions.count, sessions[index].sessionID == sessionID { sessions.remove(at: index) }
        case .heartbeat(let time):
            lastHeartbeat = time
        case let .setLimitUsage(key, usage):
            if let usage, usage != .unused { limitUsage[key] = usage } else { limitUsage.removeValue(forKey: key) }
        }
    }

    /// The first index whose session ID is not below `sessionID` (sessions are sorted).
    private func insertionIndex(_ sessionID: String) -> Int {
        var low = 0, high = sessions.count
        while low < high {
            let mid = (low + high) / 2
            if sessions[mid].sessionID < sessionID { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The sessions as they stand after an unclean stop: those still live at the last heartbeat
    /// count as disconnected at that heartbeat (or at `fallback` when no heartbeat was recorded).
    public func sessionsAfterCrash(fallback: Int64) -> [StoredSession] {
        sessions.map { session in
            var session = session
            if session.disconnectedAt == nil { session.disconnectedAt = lastHeartbeat ?? fallback }
            return session
        }
    }
}
