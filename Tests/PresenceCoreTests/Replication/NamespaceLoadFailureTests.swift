import PresenceCore
import PresenceTesting
import Testing

/// A node that cannot load a namespace for now (Redis down when it starts): the requests waiting
/// for it are answered `unavailable` when the shell's attempt fails (`Engine.loadFailed`), and the
/// node serves normally once the namespace loads (`Engine+LoadFailure`).
@Suite struct NamespaceLoadFailureTests {
    static let reply = ReplicatedEngineTests.reply

    /// Node 1 has a client of a namespace whose log holds `/members/bob` = true (written on node 0),
    /// and has not caught up: nothing of node 1's log is delivered until the test settles.
    static func loadingNode() -> (FakeLog, FakeLog.Client) {
        let log = FakeLog(nodes: 2, policy: ReplicatedEngineTests.banRules)
        let writer = log.connect(to: 0)
        log.settle()
        log.signIn(writer, as: "bob")
        log.request(1, "p", #"{"p":"/members/bob","d":true}"#, from: writer)
        log.settle()
        let client = log.connect(to: 1)
        _ = log.take(client) // the hello: a client connects while its namespace is not loaded
        return (log, client)
    }

    @Test func requestsWaitingForANamespaceThatCannotLoadAreAnsweredUnavailableAndSignInsKept() {
        let (log, client) = Self.loadingNode()
        log.request(1, "auth", "{\"cred\":\"\(EngineHarness.unsignedToken("alice"))\"}", from: client)
        log.request(2, "p", #"{"p":"/members/alice","d":true}"#, from: client)
        log.request(3, "q", #"{"p":"/members","h":""}"#, from: client)
        log.request(4, "g", #"{"p":"/members/bob"}"#, from: client)
        let rest = log.submit(to: 1) { $0.submitRead(try! Path("members"), namespace: "test", credentials: .admin, now: $1) }
        #expect(log.take(client).isEmpty, "answered before the namespace loaded")
        #expect(log.outcome(rest, on: 1) == nil)

        log.call(1) { $0.loadFailed(namespace: "test", reason: "this node cannot reach Redis", now: $1) }
        let replies = log.take(client)
        #expect(Self.reply(1, replies)?.contains(#""s":"ok""#) == true, "\(replies)")
        for r in 2...4 {
            #expect(Self.reply(r, replies)?.contains(#""s":"unavailable","d":"this node cannot reach Redis""#) == true, "\(replies)")
        }
        guard case .failure(.unavailable)? = log.outcome(rest, on: 1)?.read else {
            Issue.record("the REST read was not answered: \(String(describing: log.outcome(rest, on: 1)))")
            return
        }
        #expect(log.nodes[1].engine.pendingStepCount == 0)
        #expect(log.nodes[0].engine.value(at: try! Path("members/alice"), namespace: "test") == .null)

        // A later request waits for the next attempt; once the namespace loads it is served, as
        // the client signed in before (the rules need auth.uid === alice).
        log.request(5, "p", #"{"p":"/members/alice","d":true}"#, from: client)
        #expect(log.take(client).isEmpty)
        log.settle()
        #expect(Self.reply(5, log.take(client))?.contains(#""s":"ok""#) == true)
        log.request(6, "g", #"{"p":"/members"}"#, from: client)
        log.settle()
        #expect(Self.reply(6, log.take(client))?.contains(#""d":{"alice":true,"bob":true}"#) == true)
        #expect(log.tree(0) == log.tree(1))
    }

    @Test func aNamespaceAlreadyServedIsNotTouched() {
        let (log, client) = Self.loadingNode()
        log.settle()
        log.request(1, "g", #"{"p":"/members/bob"}"#, from: client)
        log.call(1) { $0.loadFailed(namespace: "test", reason: "late", now: $1) }
        #expect(Self.reply(1, log.take(client))?.contains(#""s":"ok","d":true"#) == true)
    }

    @Test func aClientThatLeftWhileWaitingGetsNothingAndLeavesNothing() {
        let (log, client) = Self.loadingNode()
        log.request(1, "p", #"{"p":"/members/alice","d":true}"#, from: client)
        log.disconnect(client)
        log.call(1) { $0.loadFailed(namespace: "test", reason: "down", now: $1) }
        #expect(log.take(client).isEmpty)
        #expect(log.nodes[1].engine.connectionCount == 0)
        #expect(log.nodes[1].engine.pendingStepCount == 0)
    }
}
