import PresenceCore
import Testing

@Suite struct OnDisconnectQueueTests {
    let who = Credentials.admin

    func paths(_ queue: OnDisconnectQueue) -> [String] { queue.ops.map(\.path.description) }

    @Test func aSetReplacesWhatIsStoredAtOrBelowIt() throws {
        var queue = OnDisconnectQueue()
        queue.set(.number(1), at: try Path("/a/b"), credentials: who)
        queue.set(.number(2), at: try Path("/a/c"), credentials: who)
        queue.set(.number(3), at: try Path("/a"), credentials: who)
        #expect(paths(queue) == ["/a"])
        #expect(queue.ops[0].value == .number(3))
    }

    @Test func anUpdateStoresOneOpPerKey() throws {
        var queue = OnDisconnectQueue()
        queue.update([Request.Update(path: try Path("x"), value: 1), Request.Update(path: try Path("y/z"), value: 2)],
                     at: try Path("/a"), credentials: who)
        #expect(paths(queue) == ["/a/x", "/a/y/z"])
    }

    @Test func cancelForgetsThePathAndBelowAndSplitsAnAncestorValue() throws {
        var queue = OnDisconnectQueue()
        queue.set(.object([("presence", .object([("online", false)])), ("profile", .object([("x", 1)]))]),
                  at: try Path("/users/fay"), credentials: who)
        queue.set(.number(7), at: try Path("/other"), credentials: who)
        queue.cancel(try Path("/users/fay/presence/online"))
        #expect(Set(paths(queue)) == ["/users/fay/profile", "/other"])
        queue.cancel(try Path("/"))
        #expect(queue.isEmpty)
    }

    @Test func cancellingBelowALeafKeepsTheLeaf() throws {
        var queue = OnDisconnectQueue()
        queue.set(.object([(".sv", "timestamp")]), at: try Path("/t"), credentials: who)
        queue.cancel(try Path("/t/child"))
        #expect(paths(queue) == ["/t"])
    }
}

@Suite struct ListenerIndexTests {
    @Test func findsListenersAboveAndBelowAWrite() throws {
        let index = ListenerIndex()
        let root = Listener(connection: ConnectionID(1), path: .root, tag: nil)
        let users = Listener(connection: ConnectionID(2), path: try Path("/users"), tag: nil)
        let alice = Listener(connection: ConnectionID(3), path: try Path("/users/alice/presence"), tag: nil)
        let bob = Listener(connection: ConnectionID(4), path: try Path("/users/bob"), tag: nil)
        for listener in [root, users, alice, bob] { index.add(listener) }
        #expect(Set(index.listeners(containing: try Path("/users/alice/presence/online"))) == [root, users, alice])
        #expect(Set(index.listeners(below: try Path("/users"))) == [alice, bob])
        index.remove(alice)
        #expect(index.count == 3)
        #expect(Set(index.listeners(below: try Path("/users"))) == [bob])
    }
}
