import PresenceCore
import PresenceTesting
import Testing

/// A namespace that holds data stops being followed once nothing on a node has used it for the
/// idle period (docs/scaling.md, "Idle namespaces"), and is loaded afresh when a client comes back:
/// the client then sees exactly what the other nodes have, and its writes reach them.
@Suite struct IdleReplicaTests {
    static let idle: Int64 = 10_000

    func isFollowed(_ log: FakeLog, _ index: Int, _ ns: String = "test") -> Bool {
        log.nodes[index].applied[ns] != nil
    }

    /// Node 0 writes through a client that leaves; node 1 keeps a client. Returns node 1's client.
    func writeAndLeave(_ log: FakeLog) -> FakeLog.Client {
        let writer = log.connect(to: 0)
        let stays = log.connect(to: 1)
        log.settle()
        log.request(1, "p", #"{"p":"/users/alice","d":{"online":true}}"#, from: writer)
        log.settle()
        #expect(log.take(writer).contains { $0.contains(#""s":"ok""#) })
        log.disconnect(writer)
        log.settle()
        return stays
    }

    @Test func aNamespaceWithDataIsLetGoAfterTheIdlePeriodAndLoadedAgainWhenAClientReturns() throws {
        let log = FakeLog(nodes: 2, graceMilliseconds: 0, unfollowIdleMilliseconds: Self.idle)
        let other = writeAndLeave(log)
        #expect(log.nodes[0].engine.namespacesWithData == 1)

        log.advance(byMilliseconds: Self.idle - 1)
        log.settle()
        #expect(isFollowed(log, 0), "let go before the idle period ended")
        log.advance(byMilliseconds: 1)
        log.settle()
        #expect(!isFollowed(log, 0))
        #expect(log.nodes[0].engine.followedNamespaceCount == 0)
        #expect(log.nodes[0].engine.namespacesWithData == 0)
        #expect(log.tree(0) == .null, "the replica stays in memory")
        #expect(isFollowed(log, 1), "node 1 has a client there")

        // Written elsewhere while node 0 does not follow.
        log.request(2, "p", #"{"p":"/users/bob","d":{"online":true}}"#, from: other)
        log.settle()

        let back = log.connect(to: 0)
        log.request(1, "g", #"{"p":"/users","q":{}}"#, from: back)
        #expect(!log.take(back).contains { $0.contains(#""s":"ok""#) }, "answered before the namespace was loaded")
        log.settle()
        #expect(isFollowed(log, 0))
        #expect(log.take(back).contains { $0.contains(#"{"alice":{"online":true},"bob":{"online":true}}"#) })
        #expect(log.tree(0) == log.tree(1))
        #expect(log.tree(0) == log.referee().tree)

        log.request(1, "q", #"{"p":"/users","h":""}"#, from: other)
        log.settle()
        _ = log.take(other)
        log.request(2, "p", #"{"p":"/users/carol","d":{"online":true}}"#, from: back)
        log.settle()
        #expect(log.take(back).contains { $0.contains(#""s":"ok""#) })
        #expect(log.take(other).contains { $0.contains("carol") }, "the write of the returning client reaches the other node")
        #expect(log.tree(0) == log.tree(1))
        #expect(log.applyErrors.isEmpty, "\(log.applyErrors)")
    }

    @Test func theIdlePeriodCountsFromTheLastUse() {
        let log = FakeLog(nodes: 2, graceMilliseconds: 0, unfollowIdleMilliseconds: Self.idle)
        _ = writeAndLeave(log)
        log.advance(byMilliseconds: Self.idle / 2)
        let visitor = log.connect(to: 0)
        log.settle()
        log.advance(byMilliseconds: Self.idle) // the first idle period has passed, with a client there
        log.settle()
        #expect(isFollowed(log, 0))
        log.disconnect(visitor)
        log.settle()
        log.advance(byMilliseconds: Self.idle - 1)
        log.settle()
        #expect(isFollowed(log, 0))
        log.advance(byMilliseconds: 1)
        log.settle()
        #expect(!isFollowed(log, 0))
    }

    /// Held onDisconnect ops keep the namespace followed: they run there, then it goes idle.
    @Test func heldOpsKeepTheNamespaceUntilTheyRan() {
        let log = FakeLog(nodes: 2, graceMilliseconds: 30_000, unfollowIdleMilliseconds: Self.idle)
        let alice = log.connect(to: 0)
        let watcher = log.connect(to: 1)
        log.settle()
        log.signIn(alice, as: "alice")
        log.request(1, "o", #"{"p":"/users/alice","d":{"online":false}}"#, from: alice)
        log.request(2, "p", #"{"p":"/users/alice","d":{"online":true}}"#, from: alice)
        log.settle()
        log.disconnect(alice)
        log.settle()
        log.advance(byMilliseconds: 29_999)
        log.settle()
        #expect(isFollowed(log, 0), "let go while it holds ops")
        log.advance(byMilliseconds: 1)
        log.settle()
        #expect(log.tree(1).node(at: try! Path("users/alice/online")).leafValue == .bool(false))
        #expect(log.runs(of: log.session(of: alice)) == 1)
        #expect(isFollowed(log, 0))
        log.advance(byMilliseconds: Self.idle)
        log.settle()
        #expect(!isFollowed(log, 0))
        _ = watcher
    }

    /// Without an idle period (the engine's default) a namespace with data stays followed.
    @Test func withoutAnIdlePeriodANamespaceWithDataStaysFollowed() {
        let log = FakeLog(nodes: 2, graceMilliseconds: 0)
        _ = writeAndLeave(log)
        log.advance(byMilliseconds: 3_600_000)
        log.settle()
        #expect(isFollowed(log, 0))
        #expect(log.nodes[0].engine.namespacesWithData == 1)
    }

    /// Many namespaces let go on one node, then a few come back, each equal to the other node's.
    @Test func manyNamespacesGoIdleAndComeBackEqual() {
        let log = FakeLog(nodes: 2, graceMilliseconds: 0, unfollowIdleMilliseconds: Self.idle)
        let names = (0..<50).map { "ns\($0)" }
        for (n, name) in names.enumerated() {
            let client = log.connect(to: 0, namespace: name)
            let keeper = log.connect(to: 1, namespace: name)
            log.settle()
            log.request(1, "p", "{\"p\":\"/v\",\"d\":\(n)}", from: client)
            log.settle()
            log.disconnect(client)
            log.advance(byMilliseconds: 10)
            _ = keeper
        }
        log.settle()
        log.advance(byMilliseconds: Self.idle)
        log.settle()
        #expect(log.nodes[0].engine.followedNamespaceCount == 0)
        #expect(log.nodes[1].engine.followedNamespaceCount == 50)
        for name in names.prefix(5) {
            let client = log.connect(to: 0, namespace: name)
            log.settle()
            #expect(log.tree(0, name) == log.tree(1, name))
            #expect(log.tree(0, name) == log.referee(name).tree)
            _ = client
        }
        #expect(log.nodes[0].engine.followedNamespaceCount == 5)
        #expect(log.applyErrors.isEmpty, "\(log.applyErrors)")
    }
}
