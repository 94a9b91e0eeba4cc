import PresenceCore
import PresenceTesting
import Testing

/// onDisconnect across nodes on a `FakeLog` (issue 14): a dead node's users go offline once, on
/// every survivor, dated at its last beat; a user who comes back through another node in time
/// never shows offline.
@Suite struct ReplicatedSessionTests {
    static let offline = #"{"p":"/users/alice","d":{"online":false,"lastSeen":{".sv":"timestamp"}}}"#
    static let online = #"{"p":"/users/alice","d":{"online":true,"lastSeen":{".sv":"timestamp"}}}"#

    /// alice on node 0 with an offline op, online; a watcher of her presence on each other node.
    func setUp(_ log: FakeLog) -> (alice: FakeLog.Client, watchers: [FakeLog.Client]) {
        let alice = log.connect(to: 0)
        let watchers = [log.connect(to: 1), log.connect(to: 2)]
        log.settle()
        log.signIn(alice, as: "alice")
        log.request(1, "o", Self.offline, from: alice)
        log.request(2, "p", Self.online, from: alice)
        for watcher in watchers { log.request(1, "q", #"{"p":"/users/alice","h":""}"#, from: watcher) }
        log.settle()
        #expect(log.take(alice).filter { $0.contains(#""s":"ok""#) }.count == 2)
        for watcher in watchers { _ = log.take(watcher) }
        #expect(log.records.count == 1) // the op is in the session store, owned by node 0
        return (alice, watchers)
    }

    static func pushes(_ log: FakeLog, _ client: FakeLog.Client) -> [String] {
        log.take(client).filter(ReplicatedEngineTests.isPush)
    }

    @Test func theUsersOfADeadNodeGoOfflineOnceOnEverySurvivorAtItsLastBeat() {
        let log = FakeLog(nodes: 3)
        let (alice, watchers) = setUp(log)
        let session = log.session(of: alice)
        log.advance(byMilliseconds: 500)
        let lastBeat = log.clock.now
        log.kill(0)
        log.advance(byMilliseconds: 5_000) // the lease runs out
        log.reap(0, adopter: 1)
        log.settle()
        log.advance(byMilliseconds: 2_999)
        log.settle()
        for watcher in watchers { #expect(Self.pushes(log, watcher).isEmpty) }

        log.advance(byMilliseconds: 1) // the grace window ends on the adopter
        log.settle()
        let expected = "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":\"users/alice\",\"d\":{\"lastSeen\":\(lastBeat),\"online\":false}}}}"
        for watcher in watchers { #expect(Self.pushes(log, watcher) == [expected]) }

        log.advance(byMilliseconds: 60_000)
        log.settle()
        for watcher in watchers { #expect(Self.pushes(log, watcher).isEmpty) }
        #expect(log.runs(of: session) == 1)
        #expect(log.records.isEmpty)
        #expect(log.nodes[1].engine.heldSessionCount == 0 && log.nodes[2].engine.heldSessionCount == 0)
        #expect(log.tree(1) == log.tree(2))
    }

    /// The dead node's last write of the user reaches the adopter after the adoption: it is the old
    /// session's own write, not a sign that the user came back, so the ops still run.
    @Test func aDeadNodesLastWriteAppliedAfterTheAdoptionDoesNotCancelTheOps() {
        let log = FakeLog(nodes: 3)
        let (alice, watchers) = setUp(log)
        let session = log.session(of: alice)
        log.request(3, "p", Self.online, from: alice)
        log.perform(0) // in the log; nobody has applied it
        log.kill(0)
        log.reap(0, adopter: 1)
        log.settle()
        log.advance(byMilliseconds: 3_000)
        log.settle()
        #expect(log.runs(of: session) == 1)
        for watcher in watchers { #expect(Self.pushes(log, watcher).last?.contains(#""online":false"#) == true) }
        #expect(log.tree(1).node(at: try! Path("users/alice/online")).leafValue == .bool(false))
    }

    /// The client returns through node 2 before (`adoptedFirst` false) or after a survivor adopted
    /// its session; either way it takes the session over and nobody sees it offline.
    @Test(arguments: [false, true])
    func aQuickReconnectElsewhereAfterANodeDiesShowsNoOfflineFlap(adoptedFirst: Bool) {
        let log = FakeLog(nodes: 3)
        let (alice, watchers) = setUp(log)
        let session = log.session(of: alice)
        log.kill(0)
        if adoptedFirst {
            log.advance(byMilliseconds: 1_000)
            log.reap(0, adopter: 1)
            log.settle()
            #expect(log.nodes[1].engine.heldSessionCount == 1)
        }
        log.advance(byMilliseconds: 1_000)
        let back = log.connect(to: 2, lastSession: session)
        log.settle()
        // Taken over: held on node 2 now; the adopter forgot it at the `takeover` entry.
        #expect(log.nodes[1].engine.heldSessionCount == 0 && log.nodes[2].engine.heldSessionCount == 1)
        log.signIn(back, as: "alice")
        #expect(log.nodes[2].engine.heldSessionCount == 0)
        log.request(1, "o", Self.offline, from: back)
        log.request(2, "p", Self.online, from: back)
        log.settle()
        if !adoptedFirst {
            log.advance(byMilliseconds: 4_000)
            log.reap(0, adopter: 1) // finds nothing left to adopt
            log.settle()
        }
        log.advance(byMilliseconds: 30_000)
        log.settle()

        #expect(log.runs(of: session) == 0)
        for watcher in watchers {
            #expect(!Self.pushes(log, watcher).contains { $0.contains(#""online":false"#) })
        }
        #expect(log.nodes[1].engine.heldSessionCount == 0 && log.nodes[2].engine.heldSessionCount == 0)
        #expect(log.records.count == 1) // the new connection's own op, owned by node 2
        #expect(log.records.values.first?.owner == log.nodes[2].name)
        #expect(log.tree(1).node(at: try! Path("users/alice/online")).leafValue == .bool(true))
    }

    @Test func aReconnectElsewhereWhileTheOldConnectionIsOpenClosesItWithoutRunningItsOps() {
        let log = FakeLog(nodes: 3)
        let (alice, watchers) = setUp(log)
        let session = log.session(of: alice)
        let back = log.connect(to: 2, lastSession: session)
        log.settle()
        #expect(log.closeCode(of: alice) == .replaced)
        log.signIn(back, as: "alice")
        log.advance(byMilliseconds: 30_000)
        log.settle()
        #expect(log.runs(of: session) == 0)
        for watcher in watchers { #expect(Self.pushes(log, watcher).isEmpty) }
        #expect(log.nodes.allSatisfy { $0.engine.heldSessionCount == 0 })
        #expect(log.records.isEmpty)
    }

    @Test func aDisconnectOnALiveNodeRunsTheOpsOnceAfterTheGraceWindow() {
        let log = FakeLog(nodes: 3)
        let (alice, watchers) = setUp(log)
        let session = log.session(of: alice)
        log.disconnect(alice)
        let at = log.clock.now
        log.settle()
        log.advance(byMilliseconds: 3_000)
        log.settle()
        let expected = "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":\"users/alice\",\"d\":{\"lastSeen\":\(at),\"online\":false}}}}"
        for watcher in watchers { #expect(Self.pushes(log, watcher) == [expected]) }
        #expect(log.runs(of: session) == 1)
        #expect(log.records.isEmpty)
    }

    /// Users come and go on random nodes, one node dies and is reaped, deliveries interleave at
    /// random: at the end the replicas are equal, each session's ops ran at most once, and each
    /// user is online exactly when connected.
    @Test(arguments: [31, 32, 33, 34, 35, 36, 37, 38, 105, 110, 173, 217] as [UInt64])
    func randomChurnWithANodeDeathEndsWithEqualReplicasAndNoGhosts(seed: UInt64) {
        let log = FakeLog(nodes: 3, maxReproposals: 50)
        var random = SeededRandom(seed: seed)
        let users = (0..<6).map { "u\($0)" }
        var clients: [FakeLog.Client?] = Array(repeating: nil, count: users.count)
        var lastSession: [String?] = Array(repeating: nil, count: users.count)
        var sessions: Set<String> = []
        var dead: Int?
        var killedAt: Int64 = 0
        var reaped = false
        for _ in 0..<1_500 {
            let alive = log.nodes.indices.filter { log.nodes[$0].alive }
            switch random.int(20) {
            case 0, 1:
                let u = random.int(users.count)
                if let client = clients[u] {
                    log.disconnect(client)
                    clients[u] = nil
                } else {
                    let client = log.connect(to: alive[random.int(alive.count)], lastSession: lastSession[u])
                    clients[u] = client
                    lastSession[u] = log.session(of: client)
                    sessions.insert(log.session(of: client))
                    log.request(1, "auth", "{\"cred\":\"\(EngineHarness.unsignedToken(users[u]))\"}", from: client)
                    log.request(2, "o", "{\"p\":\"/users/\(users[u])/online\",\"d\":false}", from: client)
                    log.request(3, "p", "{\"p\":\"/users/\(users[u])/online\",\"d\":true}", from: client)
                }
            case 2:
                log.advance(byMilliseconds: Int64(random.int(1_500)))
            case 3 where dead == nil && random.chance(0.05):
                let victim = random.int(3)
                log.kill(victim)
                dead = victim
                killedAt = log.clock.now
                for u in users.indices where clients[u]?.node == victim { clients[u] = nil }
            default:
                _ = log.randomStep(&random)
            }
            if let dead, !reaped, log.clock.now >= killedAt + 5_000 {
                log.reap(dead, adopter: log.nodes.indices.first { $0 != dead }!)
                reaped = true
            }
        }
        if let dead, !reaped { log.reap(dead, adopter: log.nodes.indices.first { $0 != dead }!) }
        for _ in 0..<4 {
            log.settle()
            log.advance(byMilliseconds: 10_000)
        }
        log.settle()

        #expect(log.applyErrors.isEmpty)
        let alive = log.nodes.indices.filter { log.nodes[$0].alive }
        for index in alive { #expect(log.tree(index) == log.referee().tree) }
        let runs = log.committedRuns()
        for session in sessions { #expect(runs[session, default: 0] <= 1, "session \(session) ran twice") }
        for (u, user) in users.enumerated() {
            let online = log.tree(alive[0]).node(at: try! Path("users/\(user)/online")).leafValue
            if clients[u] != nil {
                #expect(online == .bool(true), "\(user) is connected")
            } else if lastSession[u] != nil {
                #expect(online == .bool(false), "\(user) left")
            }
        }
        #expect(alive.allSatisfy { log.nodes[$0].engine.heldSessionCount == 0 })
        #expect(alive.allSatisfy { log.nodes[$0].engine.pendingStepCount == 0 })
    }
}
