import PresenceCore
import PresenceTesting
import Testing

/// Requests outside the wire protocol (REST reads and writes, rules uploads, streams) on
/// replicated nodes: answered through tickets, after the namespace is loaded and after their
/// entries commit (`Engine+Direct`).
@Suite struct ReplicatedDirectTests {
    static func path(_ text: String) -> Path { try! Path(text) }

    static func credentials(_ engine: Engine, _ uid: String, now: Int64) -> Credentials {
        try! engine.verify(credential: EngineHarness.unsignedToken(uid), now: now).get()
    }

    static func written(_ outcome: DirectOutcome?) -> DirectWriteResult? { outcome?.write }

    /// Two nodes; a client of node 0 wrote 1 at `/<key>`; node 1 has no client of the namespace.
    static func twoNodesWhereNodeZeroWrote(_ key: String) -> (FakeLog, FakeLog.Client) {
        let log = FakeLog(nodes: 2)
        let writer = log.connect(to: 0)
        log.settle()
        log.request(1, "p", "{\"p\":\"/\(key)\",\"d\":1}", from: writer)
        log.settle()
        return (log, writer)
    }

    @Test func aRestReadWaitsUntilTheNodeServesTheNamespaceThenSeesOtherNodesWrites() {
        let (log, _) = Self.twoNodesWhereNodeZeroWrote("x")
        // Node 1 has no client of the namespace: the read makes it follow, and waits.
        let read = log.submit(to: 1) { $0.submitRead(Self.path("x"), namespace: "test", credentials: .admin, now: $1) }
        #expect(log.outcome(read, on: 1) == nil)
        // Still loading: the sync read refuses rather than answering from an empty replica.
        guard case .failure(.unavailable) = log.nodes[1].engine.read(Self.path("x"), namespace: "test", credentials: .admin, now: log.clock.now) else {
            Issue.record("a node that has not caught up answered a read")
            return
        }
        log.settle()
        guard case .success(let value)? = log.outcome(read, on: 1)?.read else {
            Issue.record("the read was not answered once the node caught up: \(String(describing: log.outcome(read, on: 1)))")
            return
        }
        #expect(value == .leaf(.number(1), priority: nil))
        // Nothing holds the namespace there but its data: a second read is answered at once.
        let again = log.submit(to: 1) { $0.submitRead(Self.path("x"), namespace: "test", credentials: .admin, now: $1) }
        #expect(log.outcome(again, on: 1)?.read.map { (try? $0.get()) == value } == true)
    }

    @Test func aRestWriteIsAnsweredOnlyOnceItCommittedAndReachesListenersOnOtherNodes() {
        let log = FakeLog(nodes: 3)
        let listener = log.connect(to: 2)
        log.settle()
        log.request(1, "q", #"{"p":"/a","h":""}"#, from: listener)
        log.settle()
        _ = log.take(listener)
        let write = log.submit(to: 0) {
            $0.submitWrite(.set(.object([("b", .number(1)), ("t", .object([(".sv", .string("timestamp"))]))])), at: Self.path("a"),
                           namespace: "test", credentials: .admin, now: $1, readBack: Self.path("a"))
        }
        // Node 0 follows the namespace, catches up, proposes: no answer before the entry is applied there.
        while log.perform(0) || log.deliver(2) || log.deliver(1) {
            #expect(log.outcome(write, on: 0) == nil)
        }
        #expect(log.head() == 1)
        #expect(log.outcome(write, on: 0) == nil)
        #expect(log.deliver(0))
        guard case .success(let writes)? = Self.written(log.outcome(write, on: 0))?.result else {
            Issue.record("the write was not acknowledged: \(String(describing: log.outcome(write, on: 0)))")
            return
        }
        #expect(writes.first?.1.node(at: Self.path("t")).leafValue == .number(Double(log.clock.now)))
        #expect(Self.written(log.outcome(write, on: 0))?.readBack == writes.first?.1)
        #expect(log.take(listener).contains { $0.contains(#""p":"a","d":{"b":1"#) })
        log.settle()
        // Node 1 never followed the namespace (no client, no request there).
        #expect(log.tree(0) == log.referee().tree && log.tree(2) == log.tree(0))
        #expect(log.nodes[1].engine.appliedRevision(namespace: "test") == nil)
    }

    @Test(arguments: [31, 32, 33] as [UInt64])
    func ifMatchIncrementsFromThreeNodesEndExact(seed: UInt64) {
        let log = FakeLog(nodes: 3)
        var random = SeededRandom(seed: seed)
        let each = 25
        var done = [0, 0, 0], stale = 0
        var inFlight: [DirectTicket?] = [nil, nil, nil]
        while done.contains(where: { $0 < each }) || inFlight.contains(where: { $0 != nil }) {
            for node in 0..<3 where inFlight[node] == nil && done[node] < each && random.chance(0.5) {
                let engine = log.nodes[node].engine
                // The client's view: what this node answers for the counter (or null before it loads).
                let current = (try? engine.read(Self.path("counter"), namespace: "test", credentials: .admin, now: log.clock.now).get()) ?? .null
                let n: Int = if case .number(let value)? = current.leafValue { Int(value) } else { 0 }
                inFlight[node] = log.submit(to: node) {
                    $0.submitWrite(.set(.number(Double(n + 1))), at: Self.path("counter"), namespace: "test", credentials: .admin, now: $1,
                                   ifMatch: (Self.path("counter"), engine.etag(current)), readBack: Self.path("counter"))
                }
            }
            _ = log.randomStep(&random)
            for node in 0..<3 {
                guard let ticket = inFlight[node], let outcome = Self.written(log.outcome(ticket, on: node)) else { continue }
                inFlight[node] = nil
                switch outcome.result {
                case .success: done[node] += 1
                case .failure(.dataStale): stale += 1
                case .failure(let error): Issue.record("unexpected refusal: \(error)")
                }
            }
        }
        log.settle()
        #expect(log.applyErrors.isEmpty)
        #expect(stale > 0) // the nodes did race
        for node in 0..<3 {
            #expect(log.tree(node).node(at: Self.path("counter")).leafValue == .number(Double(3 * each)))
        }
    }

    @Test func aStaleIfMatchIsAnsweredWithTheCurrentValue() {
        let (log, _) = Self.twoNodesWhereNodeZeroWrote("c")
        // Node 1 loads the namespace for the write, which expects no data at /c.
        let ticket = log.submit(to: 1) {
            $0.submitWrite(.set(.number(2)), at: Self.path("c"), namespace: "test", credentials: .admin, now: $1,
                           ifMatch: (Self.path("c"), $0.etag(.null)), readBack: Self.path("c"))
        }
        log.settle()
        let outcome = Self.written(log.outcome(ticket, on: 1))
        guard case .failure(.dataStale)? = outcome?.result else {
            Issue.record("a stale if-match was not refused: \(String(describing: outcome))")
            return
        }
        #expect(outcome?.readBack == .leaf(.number(1), priority: nil))
        #expect(log.tree(0).node(at: Self.path("c")).leafValue == .number(1))
    }

    @Test func rulesUploadedOnOneNodeAreEnforcedOnTheOthers() throws {
        let log = FakeLog(nodes: 4)
        let clients = [log.connect(to: 1), log.connect(to: 2)]
        log.settle()
        for client in clients { log.signIn(client, as: "alice") }
        let text = #"{"rules": {"users": {"$uid": {".write": "auth.uid == $uid"}}}}"#
        let rules = try RuleSet.load(text: text, source: "test")
        let upload = log.submit(to: 0) { $0.submitRules(rules, text: text, namespace: "test", now: $1) }
        log.settle()
        guard case .success? = log.outcome(upload, on: 0)?.done else {
            Issue.record("the upload was not acknowledged: \(String(describing: log.outcome(upload, on: 0)))")
            return
        }
        for (n, client) in clients.enumerated() {
            log.request(10 + n, "p", #"{"p":"/users/bob/x","d":1}"#, from: client)
            log.request(20 + n, "p", #"{"p":"/users/alice/x","d":1}"#, from: client)
        }
        log.settle()
        for (n, client) in clients.enumerated() {
            let replies = log.take(client)
            #expect(ReplicatedEngineTests.reply(10 + n, in: replies)?.contains(#""s":"permission_denied""#) == true)
            #expect(ReplicatedEngineTests.reply(20 + n, in: replies)?.contains(#""s":"ok""#) == true)
        }
        for node in log.nodes.prefix(3) { #expect(node.engine.rules(namespace: "test")?.text == text) }
        // Node 3 never followed the namespace: asking for its rules loads it first.
        let shown = log.submit(to: 3) { $0.submitRulesDocument(namespace: "test", now: $1) }
        #expect(log.outcome(shown, on: 3) == nil)
        log.settle()
        guard case .rulesDocument(let rules?)? = log.outcome(shown, on: 3) else {
            Issue.record("the rules were not shown: \(String(describing: log.outcome(shown, on: 3)))")
            return
        }
        #expect(rules.text == text)
    }

    @Test(arguments: [41, 42] as [UInt64])
    func limitedReadsCountOnceInTheWholeCluster(seed: UInt64) throws {
        let log = FakeLog(nodes: 3, policy: LimitsTests.rules, maxReproposals: 50)
        for node in log.nodes { node.engine.setLimits(try LimitsTests.limits(limit: 2)) }
        // A wire client on node 0 refreshes once; REST reads on nodes 1 and 2 refresh too.
        let client = log.connect(to: 0)
        log.settle()
        log.signIn(client, as: "alice")
        log.request(1, "g", #"{"p":"/online-users","q":{}}"#, from: client)
        var random = SeededRandom(seed: seed)
        let reads = (1...2).map { node in
            log.submit(to: node) {
                $0.submitRead(Self.path("online-users"), namespace: "test", credentials: Self.credentials($0, "alice", now: $1), now: $1,
                              countsAsUse: true)
            }
        }
        while log.randomStep(&random) {}
        log.settle()
        var results = reads.enumerated().map { log.outcome($0.element, on: $0.offset + 1)?.read }
        let wire = ReplicatedEngineTests.reply(1, in: log.take(client)) ?? ""
        results.append(wire.contains(#""s":"ok""#) ? .success(.null) : .failure(.rateLimited(wire, retryAfterMilliseconds: nil)))
        let served = results.filter { if case .success? = $0 { true } else { false } }.count
        let limited = results.filter { if case .failure(.rateLimited)? = $0 { true } else { false } }.count
        #expect(served == 2 && limited == 1, "\(results)")
        // Nodes 1 and 2 let the (empty) namespace go after their reads; following it again replays the uses.
        log.connect(to: 1)
        log.connect(to: 2)
        log.settle()
        let key = LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "alice")
        for node in log.nodes { #expect(node.engine.limitUsage(key)?.count == 2) }
    }

    @Test func anOperatorsLimitResetOnOneNodeHoldsOnEveryNode() throws {
        let log = FakeLog(nodes: 3, policy: LimitsTests.rules)
        for node in log.nodes { node.engine.setLimits(try LimitsTests.limits(limit: 2)) }
        let clients = (0..<3).map { log.connect(to: $0) }
        log.settle()
        for client in clients { log.signIn(client, as: "alice") }
        func refresh(_ r: Int, on node: Int) -> String {
            log.request(r, "g", #"{"p":"/online-users","q":{}}"#, from: clients[node])
            log.settle()
            return ReplicatedEngineTests.reply(r, in: log.take(clients[node])) ?? "no reply"
        }
        #expect(refresh(1, on: 1).contains(#""s":"ok""#) && refresh(2, on: 2).contains(#""s":"ok""#))
        #expect(refresh(3, on: 0).contains(#""s":"rate_limited""#))
        let key = LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "alice")
        #expect(log.call(0) { $0.resetLimitUsage(key, now: $1) })
        log.settle()
        for node in log.nodes { #expect(node.engine.limitUsage(key) == nil) }
        #expect(refresh(4, on: 2).contains(#""s":"ok""#) && refresh(5, on: 1).contains(#""s":"ok""#))
        #expect(refresh(6, on: 0).contains(#""s":"rate_limited""#))
    }

    @Test func anOperatorsLimitResetIsAnsweredOnceItCommittedOnTheNodeThatTookIt() throws {
        let log = FakeLog(nodes: 2, policy: LimitsTests.rules)
        for node in log.nodes { node.engine.setLimits(try LimitsTests.limits(limit: 1)) }
        let client = log.connect(to: 0)
        log.settle()
        log.signIn(client, as: "alice")
        log.request(1, "g", #"{"p":"/online-users","q":{}}"#, from: client)
        log.settle()
        let key = LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "alice")
        #expect(log.nodes[0].engine.limitUsage(key)?.count == 1)
        let reset = log.submit(to: 0) { $0.submitLimitReset(key, now: $1) }
        #expect(log.perform(0)) // ordered in the log, not applied here yet: no answer
        #expect(log.outcome(reset, on: 0) == nil && log.nodes[0].engine.limitUsage(key) != nil)
        #expect(log.deliver(0))
        // Answered once committed, saying the user had usage when it was ordered (now gone).
        guard case .reset(.success(true))? = log.outcome(reset, on: 0) else {
            Issue.record("the reset was not answered once committed: \(String(describing: log.outcome(reset, on: 0)))")
            return
        }
        #expect(log.nodes[0].engine.limitUsage(key) == nil)
        // Another user's reset, with nothing stored for them: in force all the same, and says so.
        let nobody = LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "nobody")
        let nothing = log.submit(to: 1) { $0.submitLimitReset(nobody, now: $1) }
        log.settle()
        guard case .reset(.success(false))? = log.outcome(nothing, on: 1) else {
            Issue.record("a reset of a user without usage: \(String(describing: log.outcome(nothing, on: 1)))")
            return
        }
        // Not ordered (Redis refuses): answered unavailable, nothing reset.
        log.request(2, "g", #"{"p":"/online-users","q":{}}"#, from: client)
        log.settle()
        log.sequenceRefusal = "EPOCH"
        let refused = log.submit(to: 0) { $0.submitLimitReset(key, now: $1) }
        log.settle()
        guard case .failure(.unavailable)? = log.outcome(refused, on: 0)?.done else {
            Issue.record("a reset that never reached the log was not refused: \(String(describing: log.outcome(refused, on: 0)))")
            return
        }
        #expect(log.nodes[0].engine.limitUsage(key)?.count == 1)
    }

    @Test func aStreamOnANodeWithNoClientOfTheNamespaceOpensOnceCaughtUpAndGetsPushes() {
        let (log, writer) = Self.twoNodesWhereNodeZeroWrote("s")
        let stream = ConnectionID(900)
        let ticket = log.submit(to: 1) {
            $0.submitStream(stream, path: Self.path("s"), namespace: "test", credentials: .admin, query: .default, now: $1)
        }
        #expect(log.outcome(ticket, on: 1) == nil)
        log.settle()
        guard case .success? = log.outcome(ticket, on: 1)?.done else {
            Issue.record("the stream did not open: \(String(describing: log.outcome(ticket, on: 1)))")
            return
        }
        #expect(log.take(FakeLog.Client(node: 1, id: stream)) == [#"{"t":"d","d":{"a":"d","b":{"p":"s","d":1}}}"#])
        log.request(2, "p", #"{"p":"/s","d":2}"#, from: writer)
        log.settle()
        #expect(log.take(FakeLog.Client(node: 1, id: stream)) == [#"{"t":"d","d":{"a":"d","b":{"p":"s","d":2}}}"#])
    }

    @Test func aRequestWhoseNamespaceNeverLoadsIsAnsweredUnavailableAfterTheWait() {
        let (log, _) = Self.twoNodesWhereNodeZeroWrote("x")
        let read = log.submit(to: 1) { $0.submitRead(Self.path("x"), namespace: "test", credentials: .admin, now: $1) }
        let stream = log.submit(to: 1) {
            $0.submitStream(ConnectionID(77), path: Self.path("x"), namespace: "test", credentials: .admin, query: .default, now: $1)
        }
        // The log never reaches node 1 (it cannot catch up).
        log.advance(byMilliseconds: ReplicationConfiguration(node: "x").loadWaitMilliseconds - 1)
        #expect(log.outcome(read, on: 1) == nil)
        log.advance(byMilliseconds: 2)
        guard case .failure(.unavailable)? = log.outcome(read, on: 1)?.read, case .failure(.unavailable)? = log.outcome(stream, on: 1)?.done else {
            Issue.record("waiting requests were not answered: \(String(describing: log.outcome(read, on: 1)))")
            return
        }
        #expect(log.nodes[1].engine.connectionCount == 0)
        #expect(log.nodes[1].engine.pendingStepCount == 0)
    }
}
