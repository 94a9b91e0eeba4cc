/// Replicated mode, the proposing side (docs/scaling.md, "The replicated engine"): a request is
/// evaluated on the replica at its applied revision, recording what its checks read; refusals
/// are answered at once; a change becomes a `LogEntry` for the log (`ClusterEffect.propose`) and
/// its reply waits until this node applies it (`Engine+Apply`). A connection's next request waits
/// until its previous step is resolved, so it is evaluated on a state that includes it.
extension Engine {
    /// Takes the cluster effects produced since the last call (replicated mode), in order.
    public func drainClusterEffects() -> [ClusterEffect] {
        defer { clusterEffects.removeAll(keepingCapacity: true) }
        return clusterEffects
    }

    /// This node's id in the logs, or nil for a single node.
    public var nodeID: String? { configuration.replication?.node }

    /// Steps waiting for the log or the session store (for tests and metrics).
    public var pendingStepCount: Int { pending.count }

    func handleReplicated(_ request: NumberedRequest, from id: ConnectionID, now: Int64) {
        if pipelines[id] != nil {
            pipelines[id]!.queue.append(request)
            return
        }
        guard let connection = connections[id], namespace(connection.namespace).replica?.serving == true else {
            pipelines[id] = ConnectionPipeline(blocker: .loading, queue: [request])
            return
        }
        run(.wire(id, request), attempt: 0, now: now)
    }

    /// Evaluates a request with a proposal context: a change it decides is proposed, not
    /// committed. `g` with the read barrier on waits for the log's head first (`barrierPassed`).
    /// `usesCommitted`: a limited read whose use has committed (`PendingStep.Kind.limitedRead`) is
    /// served now, without using the limit again.
    func run(_ requester: Requester, attempt: Int, barrierPassed: Bool = false, usesCommitted: Bool = false,
             waiting: [ConnectionID] = [], now: Int64) {
        let context = ProposalContext(requester: requester, attempt: attempt, waiting: waiting)
        context.usesCommitted = usesCommitted
        let outer = proposal
        proposal = context
        switch requester {
        case let .wire(id, request):
            if case .get = request.request, configuration.replication?.readBarrier == true, !barrierPassed,
               let connection = connections[id] {
                let serial = nextSerial()
                wait(for: serial, kind: .barrier, in: namespace(connection.namespace))
                clusterEffects.append(.readBarrier(namespace: connection.namespace, id: serial))
            } else {
                execute(request, from: id, now: now)
            }
        case let .heldRun(_, session): proposeRun(session, now: now)
        case let .direct(ticket, name, request): evaluateDirect(ticket, namespace: name, request, now: now)
        }
        proposal = outer
        // Answered without a step: what its limit checks noted is final.
        if context.step == nil { limitEvents.append(contentsOf: context.events) }
    }

    /// Proposes the change the current request decided. nil when proposed; else why not.
    /// `waitKind`: what the request does once the entry commits (by default, it is answered).
    func propose(_ kind: LogEntry.Kind, writes: [(Path, Node)], in ns: Namespace, identity: String?,
                 claim: SessionClaim = .none, label: String, waitKind: PendingStep.Kind? = nil) -> EngineError? {
        guard let context = proposal, let node = configuration.replication?.node, let replica = ns.replica else {
            return .unavailable("this node does not replicate namespace \(ns.name)")
        }
        let serial = nextSerial()
        var connection: Connection?
        if case .wire(let id, _) = context.requester { connection = connections[id] }
        let origin = LogEntry.Origin(node: node, connection: connection?.id.raw ?? 0, request: serial)
        let entry = LogEntry(namespace: ns.name, kind: kind, base: replica.applied, readSet: context.reads,
                             writes: writes.map { LogEntry.Write(path: $0.0, value: $0.1) }, limitUsage: context.limitChanges,
                             identity: identity, origin: origin, session: connection?.sessionID, onAbort: context.onAbort)
        let payload: [UInt8]
        do { payload = try entry.encoded() } catch { return .invalidData("\(error)") }
        clusterEffects.append(.propose(Proposal(namespace: ns.name, payload: payload, claim: claim, origin: origin)))
        context.proposedWrites = writes
        wait(for: serial, kind: waitKind ?? .proposal(label: label), in: ns)
        return nil
    }

    /// A change to a session record. `awaited`: the current request's reply waits for the store.
    func storeSession(_ action: SessionCommand.Action, session: String, namespace: String, awaited: Bool = false) {
        guard configuration.replication != nil else { return }
        var reply: UInt64?
        if awaited, proposal != nil {
            let serial = nextSerial()
            reply = serial
            wait(for: serial, kind: .session, in: self.namespace(namespace))
        }
        clusterEffects.append(.session(SessionCommand(namespace: namespace, session: session, action: action, reply: reply)))
    }

    /// The current request now waits for step `serial`, and so do the connections behind it.
    func wait(for serial: UInt64, kind: PendingStep.Kind, in ns: Namespace) {
        guard let context = proposal else { return }
        var waiting = context.waiting
        if case .wire(let id, _) = context.requester, !waiting.contains(id) { waiting.append(id) }
        pending[serial] = PendingStep(requester: context.requester, attempt: context.attempt, namespace: ns.name,
                                      kind: kind, waiting: waiting, events: context.events, writes: context.proposedWrites)
        ns.replica?.pendingSteps += 1
        context.events = []
        context.step = serial
        for id in waiting where connections[id] != nil {
            pipelines[id, default: ConnectionPipeline()].blocker = .step(serial)
        }
    }

    func nextSerial() -> UInt64 {
        lastSerial += 1
        return lastSerial
    }

    // MARK: Resolution

    /// The store answered a session command the engine waits for (`SessionCommand.reply`).
    public func sessionCommandDone(_ reply: UInt64, _ result: SessionCommandResult, now: Int64) {
        switch result {
        case .done: resolve(reply, .committed, now: now)
        case .failed(let reason): resolve(reply, .failed(.unavailable("the session store refused the change (\(reason)); retry")), now: now)
        }
    }

    /// A proposal of this node never reached the log, or SEQ refused its claim.
    public func proposalFailed(_ origin: LogEntry.Origin, _ failure: ProposalFailure, now: Int64) {
        guard origin.node == configuration.replication?.node else { return }
        switch failure {
        case .notAppended(let reason):
            resolve(origin.request, .failed(.unavailable("the write could not be ordered (\(reason)); retry")), now: now)
        case .notOwner:
            resolve(origin.request, .notOwner, now: now)
        }
    }

    enum StepOutcome {
        case committed
        case aborted(LogEntry.OnAbort)
        case failed(EngineError)
        case notOwner
    }

    func resolve(_ serial: UInt64, _ outcome: StepOutcome, now: Int64) {
        guard let step = pending.removeValue(forKey: serial) else { return }
        namespaces[step.namespace]?.replica?.pendingSteps -= 1
        defer {
            for id in step.waiting where pipelines[id]?.blocker == .step(serial) { unblock(id, now: now) }
            if let ns = namespaces[step.namespace] { releaseIfIdle(ns, now: now) }
        }
        if case let .heldRun(_, session) = step.requester { return resolveRun(session, serial: serial, outcome, now: now) }
        // A connection that is gone gets no answer, and its write is not evaluated again: the
        // client never had an ack, and its onDisconnect ops may already be queued behind it.
        if case .wire(let id, _) = step.requester, connections[id] == nil { return }
        switch outcome {
        case .committed:
            limitEvents.append(contentsOf: step.events)
            complete(step, now: now)
        case .aborted(.dataStale):
            answer(step, .failure(.dataStale), now: now)
        case .aborted(.repropose):
            let limit = configuration.replication?.maxReproposals ?? 0
            guard step.attempt < limit else {
                return answer(step, .failure(.unavailable("the write conflicted with concurrent writes \(step.attempt + 1) times; retry")), now: now)
            }
            run(step.requester, attempt: step.attempt + 1, waiting: step.waiting, now: now)
        case .failed(let error):
            answer(step, .failure(error), now: now)
        case .notOwner:
            answer(step, .failure(.unavailable("the session moved to another node")), now: now)
        }
    }

    /// The step's entry committed, the store took its change, or its barrier passed.
    func complete(_ step: PendingStep, now: Int64) {
        switch step.kind {
        case .barrier:
            return run(step.requester, attempt: step.attempt, barrierPassed: true, waiting: step.waiting, now: now)
        case .limitedRead:
            return run(step.requester, attempt: step.attempt, barrierPassed: true, usesCommitted: true, waiting: step.waiting, now: now)
        case .proposal, .session:
            break
        }
        switch step.requester {
        case let .wire(id, request): reply(request.number, .success(.empty), to: id)
        case let .direct(ticket, name, request): completeDirect(ticket, namespace: name, request, writes: step.writes, now: now)
        case .heldRun: break
        }
    }

    func answer(_ step: PendingStep, _ result: Result<ReplyData, EngineError>, now: Int64) {
        if case let .direct(ticket, name, request) = step.requester, case .failure(let error) = result {
            return failDirect(ticket, namespace: name, request, error, now: now)
        }
        guard case let .wire(id, request) = step.requester, connections[id] != nil else { return }
        reply(request.number, result, to: id)
    }

    /// The connection's step is resolved: evaluate its waiting requests, in order, until one
    /// waits again.
    func unblock(_ id: ConnectionID, now: Int64) {
        guard pipelines[id] != nil else { return }
        pipelines[id]!.blocker = nil
        while let pipeline = pipelines[id], pipeline.blocker == nil {
            guard connections[id] != nil, let next = pipelines[id]!.next() else {
                pipelines[id] = nil
                return
            }
            run(.wire(id, next), attempt: 0, now: now)
        }
    }
}

/// Who a request or step answers to.
enum Requester {
    /// A WebSocket request.
    case wire(ConnectionID, NumberedRequest)
    /// The owner running a held session's ops.
    case heldRun(namespace: String, session: String)
    /// A REST request or stream (`Engine+Direct`), answered through its ticket.
    case direct(DirectTicket, namespace: String, DirectRequest)
}

/// The request being evaluated in replicated mode: what its checks read, the limit usage it
/// would spend, and who waits for it.
final class ProposalContext {
    let requester: Requester
    let attempt: Int
    /// Connections that wait for whatever step this request creates (besides its own).
    let waiting: [ConnectionID]
    var reads = ReadSet()
    var onAbort: LogEntry.OnAbort = .repropose
    var limitChanges: [LogEntry.LimitUsageChange] = []
    /// Limit usage is being counted for a write: it goes into the entry (`limitChanges`), not
    /// into the replica, and is applied by every node at the entry's revision.
    var collectsLimitUsage = false
    /// Limit events noted while evaluating; final once the request is answered or committed.
    var events: [LimitEvent] = []
    /// The step the request created, if any.
    var step: UInt64?
    /// The writes it proposed (a REST write answers with them once they commit).
    var proposedWrites: [(Path, Node)] = []
    /// A limited read whose use committed: serve it without using the limit again.
    var usesCommitted = false

    init(requester: Requester, attempt: Int, waiting: [ConnectionID]) {
        self.requester = requester
        self.attempt = attempt
        self.waiting = waiting
    }
}

/// A step waiting for the log (a proposal, a read barrier) or the session store.
struct PendingStep {
    enum Kind {
        /// `label` counts the write in `Counters.writes`.
        case proposal(label: String)
        case session
        case barrier
        /// A limited read's use (a `limitUsage` entry): once it commits, the read is served.
        case limitedRead
    }

    var requester: Requester
    var attempt: Int
    var namespace: String
    var kind: Kind
    /// Connections whose next request waits for it.
    var waiting: [ConnectionID]
    var events: [LimitEvent]
    var writes: [(Path, Node)] = []

    var label: String? {
        if case .proposal(let label) = kind { return label }
        return nil
    }
}

/// A connection's requests waiting for its step (or for its namespace to load).
struct ConnectionPipeline {
    enum Blocker: Equatable {
        case loading
        case step(UInt64)
    }

    var blocker: Blocker?
    var queue: [NumberedRequest] = []
    private var head = 0

    init(blocker: Blocker? = nil, queue: [NumberedRequest] = []) {
        self.blocker = blocker
        self.queue = queue
    }

    mutating func next() -> NumberedRequest? {
        guard head < queue.count else { return nil }
        let request = queue[head]
        head += 1
        if head == queue.count {
            queue.removeAll()
            head = 0
        }
        return request
    }
}
