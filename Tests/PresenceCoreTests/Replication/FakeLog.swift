import PresenceCore
import PresenceTesting
import PresenceWire

/// Plays the cluster for several replicated engines in one process: one ordered log per namespace
/// and one session store, as Redis holds them (SEQ, SESSION, TAKEOVER, REAP), with delivery under
/// the test's control. Each node's cluster effects are performed in the order the node produced
/// them (its one command connection), and each node applies every namespace's log in order; what
/// is free is the interleaving between nodes: when a node's command reaches the store, and when
/// each revision reaches each node.
final class FakeLog {
    /// A client connection on one node.
    struct Client: Hashable {
        var node: Int
        var id: ConnectionID
    }

    /// A session record in the store (`SessionRecord` without the Redis types).
    struct Record {
        var owner: String
        var held: Bool
        var session: StoredSession
    }

    final class Member {
        let name: String
        let engine: Engine
        var alive = true
        /// Cluster effects not performed yet, in order.
        var commands: [ClusterEffect] = []
        /// Per followed namespace: revisions applied, and the head it must reach to be caught up.
        var applied: [String: Int] = [:]
        var catchUpTo: [String: Int] = [:]
        var outboxes: [ConnectionID: [String]] = [:]
        var closes: [ConnectionID: CloseCode] = [:]
        var sessionIDs: [ConnectionID: String] = [:]
        var nextID: UInt64 = 1
        /// The log named this node dead.
        var declaredDead = false
        /// Set: the node starts following from this node's snapshot, not from the log's start.
        var snapshotSource: Member?
        /// The revision of the snapshot it loaded, if it did.
        var snapshotLoadedAt: UInt64?
        /// Outcomes of direct requests (REST, streams) by ticket.
        var outcomes: [DirectTicket: DirectOutcome] = [:]

        init(name: String, engine: Engine) {
            self.name = name
            self.engine = engine
        }
    }

    let clock = ManualClock()
    private(set) var nodes: [Member] = []
    private(set) var logs: [String: [LogRevision]] = [:]
    private(set) var records: [String: Record] = [:]
    private var lastBeats: [String: Int64] = [:]
    /// Errors an engine's `apply` threw (a test fails on any).
    private(set) var applyErrors: [String] = []
    let graceMilliseconds: Int64
    let windowCapacity: UInt64
    /// While set, SEQ refuses every append with this answer (`EPOCH`, `FENCED`: Redis came back
    /// empty, or the node lost its lease).
    var sequenceRefusal: String?

    /// `count` nodes named a, b, c... sharing one configuration. The hash digest is a small FNV-1a
    /// (tests only need every node to agree on it).
    init(nodes count: Int, graceMilliseconds: Int64 = 3_000, policy: any AccessPolicy = OpenAccessPolicy(),
         readBarrier: Bool = false, maxReproposals: Int = 3, windowCapacity: UInt64 = VersionWindow.defaultCapacity,
         unfollowIdleMilliseconds: Int64? = nil) {
        self.graceMilliseconds = graceMilliseconds
        self.windowCapacity = windowCapacity
        for index in 0..<count {
            let name = String(UnicodeScalar(UInt8(97 + index))) + "#1"
            var sessions = 0
            let configuration = Engine.Configuration(
                disconnectGraceMilliseconds: graceMilliseconds, hashDigest: FakeLog.digest,
                replication: ReplicationConfiguration(node: name, windowCapacity: windowCapacity, maxReproposals: maxReproposals,
                                                      readBarrier: readBarrier, unfollowIdleMilliseconds: unfollowIdleMilliseconds))
            let engine = Engine(configuration: configuration, policy: policy, makeSessionID: {
                sessions += 1
                return "\(name)-s\(sessions)"
            })
            nodes.append(Member(name: name, engine: engine))
        }
    }

    @Sendable static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return (0..<8).map { UInt8(truncatingIfNeeded: hash >> (8 * $0)) }
    }

    // MARK: Clients

    @discardableResult
    func connect(to index: Int, namespace: String = "test", lastSession: String? = nil) -> Client {
        let node = nodes[index]
        let id = ConnectionID(node.nextID)
        node.nextID += 1
        node.engine.open(id, namespace: namespace, lastSession: lastSession, host: "localhost", now: clock.now)
        collect(node)
        return Client(node: index, id: id)
    }

    func send(_ text: String, from client: Client) {
        let node = nodes[client.node]
        guard case .request(let request)? = try? RequestDecoder.decode(Array(text.utf8)) else {
            preconditionFailure("not a request: \(text)")
        }
        node.engine.handle(request, from: client.id, now: clock.now)
        collect(node)
    }

    /// Sends `{"t":"d","d":{"r":r,"a":action,"b":body}}`.
    func request(_ r: Int, _ action: String, _ body: String, from client: Client) {
        send("{\"t\":\"d\",\"d\":{\"r\":\(r),\"a\":\"\(action)\",\"b\":\(body)}}", from: client)
    }

    func signIn(_ client: Client, as uid: String) {
        request(0, "auth", "{\"cred\":\"\(EngineHarness.unsignedToken(uid))\"}", from: client)
        _ = take(client)
    }

    func disconnect(_ client: Client) {
        nodes[client.node].engine.disconnect(client.id, now: clock.now)
        collect(nodes[client.node])
    }

    /// A direct request (REST, rules, stream) on node `index`: its ticket (a replicated node always
    /// answers through one; the outcome may already be in `outcome(_:on:)`).
    func submit(to index: Int, _ request: (Engine, Int64) -> DirectAnswer) -> DirectTicket {
        guard case .later(let ticket) = call(index, request) else { preconditionFailure("a replicated node answered at once") }
        return ticket
    }

    /// Any call on node `index`'s engine (an operator's action, say); what it produced is collected.
    func call<T>(_ index: Int, _ body: (Engine, Int64) -> T) -> T {
        let result = body(nodes[index].engine, clock.now)
        collect(nodes[index])
        return result
    }

    func outcome(_ ticket: DirectTicket, on index: Int) -> DirectOutcome? { nodes[index].outcomes[ticket] }

    /// Everything sent to the client since the last call, as wire text.
    func take(_ client: Client) -> [String] {
        defer { nodes[client.node].outboxes[client.id] = [] }
        return nodes[client.node].outboxes[client.id] ?? []
    }

    /// What the client has received so far, without taking it.
    func peek(_ client: Client) -> [String] { nodes[client.node].outboxes[client.id] ?? [] }

    func session(of client: Client) -> String { nodes[client.node].sessionIDs[client.id]! }
    func closeCode(of client: Client) -> CloseCode? { nodes[client.node].closes[client.id] }

    // MARK: Time

    /// Moves the clock; every live node whose timer is due ticks.
    func advance(byMilliseconds delta: Int64) {
        clock.advance(byMilliseconds: delta)
        for node in nodes where node.alive {
            while let deadline = node.engine.nextDeadline, deadline <= clock.now {
                node.engine.tick(now: clock.now)
                collect(node)
                if node.engine.nextDeadline == deadline { break }
            }
        }
    }

    // MARK: Delivery

    /// Performs the next cluster effect of node `index` against the log and the store.
    @discardableResult
    func perform(_ index: Int) -> Bool {
        let node = nodes[index]
        guard node.alive, !node.commands.isEmpty else { return false }
        let effect = node.commands.removeFirst()
        let engine = node.engine
        switch effect {
        case .follow, .unfollow:
            break // performed as they are produced (`collect`)
        case .propose(let proposal):
            if let refusal = sequenceRefusal {
                engine.proposalFailed(proposal.origin, .notAppended(refusal), now: clock.now)
            } else if case .own(let session) = proposal.claim, records[session]?.owner != node.name {
                engine.proposalFailed(proposal.origin, .notOwner, now: clock.now)
            } else {
                append(.proposal(proposal.payload), by: node.name, to: proposal.namespace)
            }
        case .session(let command):
            performSession(command, on: node)
        case let .readBarrier(ns, id):
            engine.headRevision(id, rev: UInt64(logs[ns]?.count ?? 0), now: clock.now)
        case .declaredDead:
            node.declaredDead = true
        }
        collect(node)
        return true
    }

    /// Applies the next revision of namespace `ns` (any followed one when nil) on node `index`.
    @discardableResult
    func deliver(_ index: Int, namespace ns: String? = nil) -> Bool {
        let node = nodes[index]
        guard node.alive else { return false }
        let names = ns.map { [$0] } ?? node.applied.keys.sorted()
        for name in names {
            guard let applied = node.applied[name], let log = logs[name], applied < log.count else { continue }
            do {
                try node.engine.apply(log[applied], namespace: name, now: clock.now)
            } catch {
                applyErrors.append("\(node.name) rev \(applied + 1): \(error)")
                return false
            }
            node.applied[name] = applied + 1
            if applied + 1 == node.catchUpTo[name] { node.engine.caughtUp(namespace: name, now: clock.now) }
            collect(node)
            return true
        }
        return false
    }

    /// Performs and delivers everything, node by node in turn, until nothing is left.
    func settle() {
        var progress = true
        while progress {
            progress = false
            for index in nodes.indices {
                while perform(index) { progress = true }
                while deliver(index) { progress = true }
            }
        }
    }

    /// Performs or delivers one step chosen at random among those possible; false when none is.
    /// `weights` skews how often a node acts (a slow node lags behind the log).
    func randomStep(_ random: inout SeededRandom, weights: [Int]? = nil) -> Bool {
        var choices: [(Int, Bool)] = []
        for (index, node) in nodes.enumerated() where node.alive {
            let weight = weights?[index] ?? 1
            if !node.commands.isEmpty { choices += Array(repeating: (index, true), count: weight) }
            if node.applied.contains(where: { $0.value < (logs[$0.key]?.count ?? 0) }) {
                choices += Array(repeating: (index, false), count: weight)
            }
        }
        guard !choices.isEmpty else { return false }
        let (index, command) = choices[random.int(choices.count)]
        return command ? perform(index) : deliver(index)
    }

    // MARK: Node failure

    /// Node `index` dies (`kill -9`): it performs and receives nothing more; its last beat was now.
    func kill(_ index: Int) {
        nodes[index].alive = false
        nodes[index].commands = []
        lastBeats[nodes[index].name] = clock.now
    }

    /// REAP by `adopter` once the dead node's lease expired: the log of every namespace gets a
    /// `dead` entry, and `adopter` takes the dead node's sessions over as held, live ones dated at
    /// its last beat and due a grace window from now.
    func reap(_ index: Int, adopter: Int) {
        let deadName = nodes[index].name
        let survivor = nodes[adopter]
        for ns in logs.keys.sorted() {
            append(.nodeDead(deadNode: deadName, lastBeat: lastBeats[deadName] ?? clock.now), by: survivor.name, to: ns)
        }
        var adopted: [StoredSession] = []
        for id in records.keys.sorted() where records[id]!.owner == deadName {
            var record = records[id]!
            if !record.held {
                record.session.disconnectedAt = lastBeats[deadName] ?? clock.now
                record.session.runAt = clock.now + graceMilliseconds
            }
            record.owner = survivor.name
            record.held = true
            records[id] = record
            adopted.append(record.session)
        }
        survivor.engine.adoptSessions(adopted, now: clock.now)
        collect(survivor)
    }

    // MARK: Inspection

    /// The tree of namespace `ns` on node `index`.
    func tree(_ index: Int, _ ns: String = "test") -> PresenceCore.Node { nodes[index].engine.value(at: .root, namespace: ns) }

    func head(_ ns: String = "test") -> Int { logs[ns]?.count ?? 0 }

    /// The log replayed by an independent referee (the public `VersionWindow`, a plain tree): the
    /// tree every replica must hold, and the entries that committed.
    func referee(_ ns: String = "test") -> (tree: PresenceCore.Node, committed: [LogEntry]) {
        let window = VersionWindow(capacity: windowCapacity)
        var tree = PresenceCore.Node.null
        var committed: [LogEntry] = []
        for revision in logs[ns] ?? [] {
            var written: [WrittenPath] = []
            if case .proposal(let bytes) = revision.body, let entry = try? LogEntry(decoding: bytes),
               window.validate(entry.readSet, base: entry.base) == .valid {
                for write in entry.writes {
                    written.append(WrittenPath(writing: write.value, at: write.path, over: tree))
                    tree.set(write.value, at: write.path)
                }
                written += entry.virtualWrites
                committed.append(entry)
            }
            try! window.record(written, rev: revision.rev)
        }
        return (tree, committed)
    }

    /// How many times the held ops of `session` committed.
    func runs(of session: String, _ ns: String = "test") -> Int { committedRuns(ns)[session, default: 0] }

    /// How many times each session's held ops committed.
    func committedRuns(_ ns: String = "test") -> [String: Int] {
        var runs: [String: Int] = [:]
        for entry in referee(ns).committed {
            if case .runHeld(let session) = entry.kind { runs[session, default: 0] += 1 }
        }
        return runs
    }

    // MARK: Private

    private func append(_ body: LogRevision.Body, by node: String, to ns: String) {
        let rev = UInt64((logs[ns]?.count ?? 0) + 1)
        logs[ns, default: []].append(LogRevision(rev: rev, node: node, time: clock.now, body: body))
    }

    private func performSession(_ command: SessionCommand, on node: Member) {
        let engine = node.engine
        let id = command.session
        var result = SessionCommandResult.done
        switch command.action {
        case .put(let session):
            if let owner = records[id]?.owner, owner != node.name {
                result = .failed("NOT_OWNER")
            } else {
                records[id] = Record(owner: node.name, held: false, session: session)
            }
        case let .change(_, changes):
            if var record = records[id], record.owner == node.name {
                record.session.ops = StoredSession.replay(changes, onto: record.session.ops)
                records[id] = record
            } else {
                result = .failed(records[id] == nil ? "ABSENT" : "NOT_OWNER")
            }
        case let .hold(disconnectedAt, runAt):
            if var record = records[id], record.owner == node.name {
                record.held = true
                record.session.disconnectedAt = disconnectedAt
                record.session.runAt = runAt
                records[id] = record
            }
        case .drop:
            if records[id]?.owner == node.name { records[id] = nil }
        case let .takeover(now, grace):
            guard var record = records[id] else {
                return engine.takeoverResolved(session: id, .absent, now: clock.now)
            }
            let previous = record.owner
            if previous != node.name {
                if !record.held {
                    record.session.disconnectedAt = min(now, lastBeats[previous] ?? now)
                    record.session.runAt = now + grace
                }
                record.owner = node.name
                record.held = true
                records[id] = record
                append(.takeover(session: id, from: previous), by: node.name, to: command.namespace)
            }
            return engine.takeoverResolved(session: id, .held(record.session), now: clock.now)
        }
        if let reply = command.reply { engine.sessionCommandDone(reply, result, now: clock.now) }
    }

    private func collect(_ node: Member) {
        for (ticket, outcome) in node.engine.takeDirectOutcomes() { node.outcomes[ticket] = outcome }
        for effect in node.engine.drainEffects() {
            switch effect {
            case let .send(recipients, message):
                let text = OutboundEncoder.encode(message)
                if case let .hello(_, _, session) = message, let first = recipients.first { node.sessionIDs[first] = session }
                for id in recipients { node.outboxes[id, default: []].append(text) }
            case let .close(id, code, _):
                node.closes[id] = code
            }
        }
        // The shell starts and stops tailing at once (no revision of a released namespace reaches
        // the engine); the rest goes to Redis in order.
        var caughtUpAlready: [String] = []
        for effect in node.engine.drainClusterEffects() {
            switch effect {
            case .follow(let ns):
                node.applied[ns] = 0
                if let taken = node.snapshotSource?.engine.replicaSnapshot(namespace: ns) {
                    do {
                        // Through the bytes Redis would hold, in small chunks.
                        let chunks = try taken.encodedChunks(token: "t\(taken.rev)", chunkBytes: 97)
                        let snapshot = try ReplicaSnapshot(decodingChunks: Dictionary(uniqueKeysWithValues: chunks.map { ($0.id, $0.data) }),
                                                           namespace: ns, rev: taken.rev)
                        try node.engine.loadReplica(snapshot, now: clock.now)
                        node.applied[ns] = Int(snapshot.rev)
                        node.snapshotLoadedAt = snapshot.rev
                    } catch {
                        applyErrors.append("\(node.name) loading a snapshot: \(error)")
                    }
                }
                node.catchUpTo[ns] = logs[ns]?.count ?? 0
                if node.catchUpTo[ns] == node.applied[ns] { caughtUpAlready.append(ns) }
            case .unfollow(let ns):
                node.applied[ns] = nil
                node.catchUpTo[ns] = nil
            default:
                node.commands.append(effect)
            }
        }
        for ns in caughtUpAlready where node.applied[ns] == node.catchUpTo[ns] {
            node.engine.caughtUp(namespace: ns, now: clock.now)
            collect(node)
        }
    }
}
