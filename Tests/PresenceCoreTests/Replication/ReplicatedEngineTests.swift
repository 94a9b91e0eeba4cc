import PresenceCore
import PresenceTesting
import Testing

/// Three replicated engines on one `FakeLog` (issue 14, at the core level): one global order,
/// own writes, rules and transactions that race correctly, equal replicas.
@Suite struct ReplicatedEngineTests {
    static func isPush(_ text: String) -> Bool { text.hasPrefix(#"{"t":"d","d":{"a":"#) }

    static func reply(_ r: Int, in texts: [String]) -> String? {
        texts.first { $0.hasPrefix("{\"t\":\"d\",\"d\":{\"r\":\(r),") }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func writesOnAnyNodeReachEveryListenerInOneOrder(seed: UInt64) {
        let log = FakeLog(nodes: 3)
        let listeners = (0..<3).map { log.connect(to: $0) }
        let writers = (0..<3).map { log.connect(to: $0) }
        log.settle()
        for listener in listeners { log.request(1, "q", #"{"p":"/room","h":""}"#, from: listener) }
        log.settle()
        for client in listeners + writers { _ = log.take(client) }

        var random = SeededRandom(seed: seed)
        var next = [1, 1, 1]
        var sent = 0
        while true {
            if sent < 45, random.chance(0.3) {
                let w = random.int(3)
                let r = next[w]
                switch random.int(3) {
                case 0: log.request(r, "p", "{\"p\":\"/room/last\",\"d\":\"\(w)-\(r)\"}", from: writers[w])
                case 1: log.request(r, "m", "{\"p\":\"/room\",\"d\":{\"by/\(w)\":\(r),\"last\":\"m\(w)-\(r)\"}}", from: writers[w])
                default: log.request(r, "p", "{\"p\":\"/room/by/\(random.int(3))\",\"d\":null}", from: writers[w])
                }
                next[w] += 1
                sent += 1
            } else if !log.randomStep(&random, weights: [1, 2, 4]), sent >= 45 {
                break
            }
        }
        log.settle()

        #expect(log.applyErrors.isEmpty)
        let pushes = listeners.map { log.take($0).filter(Self.isPush) }
        #expect(!pushes[0].isEmpty)
        #expect(pushes[1] == pushes[0])
        #expect(pushes[2] == pushes[0])
        for (index, writer) in writers.enumerated() {
            let replies = log.take(writer)
            #expect(replies.count == next[index] - 1)
            #expect(replies.allSatisfy { $0.contains(#""s":"ok""#) })
        }
        for index in 0..<3 { #expect(log.tree(index) == log.referee().tree) }
        #expect(log.nodes.allSatisfy { $0.engine.appliedRevision(namespace: "test") == UInt64(log.head()) })
        #expect(log.nodes.allSatisfy { $0.engine.pendingStepCount == 0 })
    }

    @Test func aClientSeesItsOwnAcknowledgedWritesAndABarrieredReadOnAnotherNodeToo() {
        let log = FakeLog(nodes: 2, readBarrier: true)
        let alice = log.connect(to: 0)
        let bob = log.connect(to: 1)
        log.settle()
        _ = log.take(alice)
        _ = log.take(bob)

        log.request(1, "p", #"{"p":"/x","d":1}"#, from: alice)
        #expect(log.take(alice).isEmpty) // not acknowledged before the log has it
        log.perform(0)
        #expect(log.take(alice).isEmpty) // appended, not yet applied here
        log.deliver(0)
        #expect(Self.reply(1, in: log.take(alice))?.contains(#""s":"ok""#) == true)
        log.request(2, "g", #"{"p":"/x"}"#, from: alice)
        log.perform(0) // the barrier: the head is already applied
        #expect(Self.reply(2, in: log.take(alice))?.contains(#""d":1"#) == true)

        // Node 1 has not applied revision 1: its read waits for it rather than answer null.
        log.request(1, "g", #"{"p":"/x"}"#, from: bob)
        log.perform(1)
        #expect(log.take(bob).isEmpty)
        log.deliver(1)
        #expect(Self.reply(1, in: log.take(bob))?.contains(#""s":"ok","d":1"#) == true)
    }

    static let banRules = try! RuleSet.load(text: """
        {"rules": {
          "banned": {".read": true, "$uid": {".write": "auth != null && auth.uid === 'admin'"}},
          "members": {".read": true, "$uid": {".write": "auth != null && auth.uid === $uid && !root.child('banned').child($uid).exists()"}}
        }}
        """, source: "test")

    @Test func aJoinAllowedOnAStaleReplicaButNotAfterTheBanIsRefused() {
        let log = FakeLog(nodes: 3, policy: Self.banRules)
        let admin = log.connect(to: 0)
        let mallory = log.connect(to: 1)
        let watcher = log.connect(to: 2)
        log.settle()
        log.signIn(admin, as: "admin")
        log.signIn(mallory, as: "mallory")
        log.request(1, "q", #"{"p":"/members","h":""}"#, from: watcher)
        log.settle()
        _ = log.take(watcher)

        log.request(1, "p", #"{"p":"/banned/mallory","d":true}"#, from: admin)
        log.perform(0) // the ban is in the log; node 1 has not applied it
        log.request(1, "p", #"{"p":"/members/mallory","d":true}"#, from: mallory)
        #expect(!log.nodes[1].commands.isEmpty) // allowed on the stale replica: proposed
        log.perform(1) // ordered after the ban, evaluated before it
        log.settle()

        #expect(Self.reply(1, in: log.take(mallory))?.contains(#""s":"permission_denied""#) == true)
        #expect(Self.reply(1, in: log.take(admin))?.contains(#""s":"ok""#) == true)
        for index in 0..<3 {
            #expect(log.tree(index).node(at: try! Path("members/mallory")) == .null)
            #expect(log.tree(index).node(at: try! Path("banned/mallory")).leafValue == .bool(true))
        }
        #expect(log.take(watcher).filter(Self.isPush).isEmpty)
    }

    @Test(arguments: [11, 12, 13] as [UInt64])
    func transactionsFromThreeNodesIncrementOneCounterExactly(seed: UInt64) {
        let log = FakeLog(nodes: 3)
        var counter = CounterClients(log, on: [0, 1, 2])
        var random = SeededRandom(seed: seed)
        var steps = 0
        while counter.done.min()! < 100, steps < 500_000 {
            steps += 1
            counter.step(&random, each: 100)
        }
        log.settle()
        #expect(counter.done == [100, 100, 100])
        #expect(counter.stale > 0) // the nodes did race
        for index in 0..<3 {
            #expect(log.tree(index).node(at: try! Path("counter")).leafValue == .number(300))
        }
    }

    /// Node 2 starts following mid-run from node 0's snapshot while node 1 lags (its proposals
    /// carry bases from before the snapshot): it must judge them as the others do.
    @Test(arguments: [41, 42, 43, 44] as [UInt64])
    func aNodeStartedFromASnapshotValidatesAsTheOthers(seed: UInt64) {
        let log = FakeLog(nodes: 3, windowCapacity: 64)
        var counter = CounterClients(log, on: [0, 1])
        log.nodes[2].snapshotSource = log.nodes[0]
        var random = SeededRandom(seed: seed)
        var steps = 0
        while counter.done.reduce(0, +) < 240, steps < 500_000 {
            steps += 1
            if counter.clients.count == 2, counter.done.reduce(0, +) >= 60 { counter.add(log.connect(to: 2)) }
            counter.step(&random, each: 80, weights: [2, 1, 2])
        }
        log.settle()
        #expect(log.applyErrors.isEmpty)
        #expect((log.nodes[2].snapshotLoadedAt ?? 0) > 0)
        #expect(counter.done == [80, 80, 80])
        for index in 0..<3 { #expect(log.tree(index) == log.referee().tree) }
        #expect(log.tree(2).node(at: try! Path("counter")).leafValue == .number(240))
    }

    @Test(arguments: [21, 22, 23] as [UInt64])
    func aWriteLimitIsSpentOnceInTheWholeCluster(seed: UInt64) {
        let log = FakeLog(nodes: 3, policy: WriteLimitsTests.rules, maxReproposals: 50)
        for node in log.nodes { node.engine.setLimits(WriteLimitsTests.limits) }
        let clients = (0..<3).map { log.connect(to: $0) }
        log.settle()
        for client in clients { log.signIn(client, as: "alice") }
        var random = SeededRandom(seed: seed)
        for (index, client) in clients.enumerated() {
            for n in 1...2 { log.request(n, "p", "{\"p\":\"/messages/alice/m\(index)-\(n)\",\"d\":\"hi\"}", from: client) }
        }
        while log.randomStep(&random) {}
        let replies = clients.flatMap { client in [1, 2].compactMap { Self.reply($0, in: log.peek(client)) } }
        #expect(replies.count == 6)
        #expect(replies.filter { $0.contains(#""s":"ok""#) }.count == 3)
        #expect(replies.filter { $0.contains(#""s":"rate_limited""#) }.count == 3)
        let key = LimitUsageKey(namespace: "test", limit: "sendMessage", uid: "alice")
        for node in log.nodes { #expect(node.engine.limitUsage(key)?.count == 3) }
        #expect(log.tree(1) == log.tree(0) && log.tree(2) == log.tree(0))
    }

    @Test func aWriteTheLogRefusesIsAnsweredUnavailableAndChangesNothing() {
        let log = FakeLog(nodes: 2)
        let alice = log.connect(to: 0)
        log.connect(to: 1) // node 1 serves the namespace too
        log.settle()
        _ = log.take(alice)
        log.sequenceRefusal = "EPOCH"
        log.request(1, "p", #"{"p":"/x","d":1}"#, from: alice)
        log.request(2, "p", #"{"p":"/y","d":2}"#, from: alice) // waits behind the first
        log.settle()
        let replies = log.take(alice)
        #expect(Self.reply(1, in: replies)?.contains(#""s":"unavailable""#) == true)
        #expect(Self.reply(1, in: replies)?.contains("EPOCH") == true)
        #expect(Self.reply(2, in: replies)?.contains(#""s":"unavailable""#) == true)
        #expect(log.head() == 0 && log.tree(0).isNull && log.tree(1).isNull)

        log.sequenceRefusal = nil
        log.request(3, "p", #"{"p":"/x","d":3}"#, from: alice)
        log.settle()
        #expect(Self.reply(3, in: log.take(alice))?.contains(#""s":"ok""#) == true)
        #expect(log.tree(1).node(at: try! Path("x")).leafValue == .number(3))
        #expect(log.nodes.allSatisfy { $0.engine.pendingStepCount == 0 })
    }

    @Test func aNodeThatStartsFollowingLateServesNothingUntilItHasCaughtUp() {
        let log = FakeLog(nodes: 2)
        let writer = log.connect(to: 0)
        log.settle()
        for n in 1...5 { log.request(n, "p", "{\"p\":\"/a\",\"d\":\(n)}", from: writer) }
        log.settle()
        #expect(log.take(writer).filter { $0.contains(#""s":"ok""#) }.count == 5)

        let joiner = log.connect(to: 1) // node 1 starts following "test" now, at head 5
        log.request(1, "g", #"{"p":"/a"}"#, from: joiner)
        log.request(2, "q", #"{"p":"/a","h":""}"#, from: joiner)
        for _ in 1...4 {
            #expect(log.deliver(1))
            #expect(log.peek(joiner).count == 1) // the hello only: no stale answer
        }
        #expect(log.deliver(1))
        let answers = log.take(joiner)
        #expect(Self.reply(1, in: answers)?.contains(#""s":"ok","d":5"#) == true)
        #expect(answers.contains(#"{"t":"d","d":{"a":"d","b":{"p":"a","d":5}}}"#))

        log.request(6, "p", #"{"p":"/a","d":6}"#, from: writer)
        log.settle()
        #expect(log.take(joiner) == [#"{"t":"d","d":{"a":"d","b":{"p":"a","d":6}}}"#])
        #expect(log.tree(1) == log.referee().tree)
    }

    @Test func aTransactionWhoseHashIsAlreadyStaleOnItsNodeIsRefusedWithoutTheLog() {
        let log = FakeLog(nodes: 2)
        let client = log.connect(to: 0)
        log.settle()
        log.request(1, "p", #"{"p":"/c","d":1}"#, from: client)
        log.settle()
        let head = log.head()
        let stale = log.nodes[0].engine.hash(.null)!
        log.request(2, "p", "{\"p\":\"/c\",\"d\":2,\"h\":\"\(stale)\"}", from: client)
        #expect(log.nodes[0].commands.isEmpty)
        #expect(Self.reply(2, in: log.take(client))?.contains(#""s":"datastale""#) == true)
        log.settle()
        #expect(log.head() == head)
    }
}

/// Clients incrementing `/counter` by transaction (`p` with `h`), each from its node's replica
/// (pushes reach a client before any later reply, so that is the client's view).
struct CounterClients {
    let log: FakeLog
    private(set) var clients: [FakeLog.Client] = []
    private(set) var done: [Int] = []
    private(set) var stale = 0
    private var inFlight: [Int?] = []
    private var next: [Int] = []

    init(_ log: FakeLog, on nodes: [Int]) {
        self.log = log
        let clients = nodes.map { log.connect(to: $0) }
        log.settle()
        for client in clients { add(client) }
    }

    mutating func add(_ client: FakeLog.Client) {
        _ = log.take(client)
        clients.append(client)
        done.append(0)
        inFlight.append(nil)
        next.append(1)
    }

    /// Clients with fewer than `each` increments may send one; one random step of the log; the
    /// answers are read.
    mutating func step(_ random: inout SeededRandom, each: Int, weights: [Int]? = nil) {
        for (i, client) in clients.enumerated() where inFlight[i] == nil && done[i] < each && random.chance(0.5) {
            let engine = log.nodes[client.node].engine
            let current = engine.value(at: try! Path("counter"), namespace: "test")
            let n: Int = if case .number(let value)? = current.leafValue { Int(value) } else { 0 }
            log.request(next[i], "p", "{\"p\":\"/counter\",\"d\":\(n + 1),\"h\":\"\(engine.hash(current)!)\"}", from: client)
            inFlight[i] = next[i]
            next[i] += 1
        }
        _ = log.randomStep(&random, weights: weights)
        for (i, client) in clients.enumerated() {
            guard let r = inFlight[i], let answer = ReplicatedEngineTests.reply(r, in: log.take(client)) else { continue }
            inFlight[i] = nil
            if answer.contains(#""s":"ok""#) {
                done[i] += 1
            } else {
                #expect(answer.contains(#""s":"datastale""#), "\(answer)")
                stale += 1
            }
        }
    }
}
