import PresenceCore
import PresenceTesting
import Testing

/// The engine driven through the wire codec with a manual clock: the same scenarios the live
/// tests run against the real server, without sockets.
@Suite struct EngineTests {
    let token = "eyJhbGciOiJub25lIiwidHlwZSI6IkpXVCJ9.eyJzdWIiOiJhbGljZSIsImZpcmViYXNlIjp7InNpZ25faW5fcHJvdmlkZXIiOiJjdXN0b20ifX0."

    @Test func helloCarriesTimeHostAndSession() {
        let harness = EngineHarness()
        let id = harness.connect(host: "example:9000")
        #expect(harness.take(id) == [#"{"t":"c","d":{"t":"h","d":{"ts":1700000000000,"v":"5","h":"example:9000","s":"session1"}}}"#])
    }

    @Test func listenSendsDataBeforeItsOk() {
        let harness = EngineHarness()
        let id = harness.connect()
        _ = harness.take(id)
        harness.request(1, "q", #"{"p":"/users/alice/presence","h":""}"#, from: id)
        #expect(harness.take(id) == [
            #"{"t":"d","d":{"a":"d","b":{"p":"users/alice/presence","d":null}}}"#,
            #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":{}}}}"#,
        ])
    }

    @Test func writeEchoReachesEveryListenerBeforeTheAckWithOneNow() {
        let harness = EngineHarness()
        let writer = harness.connect()
        let watcher = harness.connect()
        harness.request(1, "q", #"{"p":"/users/alice/presence","h":""}"#, from: writer)
        harness.request(1, "q", #"{"p":"/users","h":""}"#, from: watcher)
        _ = harness.take(writer)
        _ = harness.take(watcher)
        harness.clock.advance(byMilliseconds: 5)
        harness.request(2, "p", #"{"p":"/users/alice/presence","d":{"online":true,"lastSeen":{".sv":"timestamp"},"t2":{".sv":"timestamp"}}}"#, from: writer)
        let echo = #"{"t":"d","d":{"a":"d","b":{"p":"users/alice/presence","d":{"lastSeen":1700000000005,"online":true,"t2":1700000000005}}}}"#
        #expect(harness.take(writer) == [echo, #"{"t":"d","d":{"r":2,"b":{"s":"ok","d":""}}}"#])
        // A listener above the write receives the change at the write's path only.
        #expect(harness.take(watcher) == [echo])
    }

    /// A merge's child paths are each valid, but joined to the merge's location they must stay
    /// within 768 bytes and 32 levels, as any written path (found by the `rest` fuzz target:
    /// nothing checked the join, so a node was stored at a path no client may write).
    @Test func aMergeWhoseJoinedPathsAreTooLongOrTooDeepIsRefusedAndStoresNothing() throws {
        let harness = EngineHarness()
        let id = harness.connect()
        _ = harness.take(id)
        let base = "/" + String(repeating: "a", count: 500)
        let key = String(repeating: "b", count: 300)
        let deep = (1...20).map { "d\($0)" }.joined(separator: "/")
        for (number, action) in [(1, "m"), (2, "om")] {
            harness.request(number, action, #"{"p":"\#(base)","d":{"\#(key)":1,"ok":2}}"#, from: id)
            let reply = harness.take(id).last ?? ""
            #expect(reply.contains(#""s":"invalid_data""#), "\(action): \(reply)")
            #expect(reply.contains("longer than 768 bytes"), "\(action): \(reply)")
            harness.request(number + 10, action, #"{"p":"/\#(deep)","d":{"\#(deep)":1}}"#, from: id)
            let deepReply = harness.take(id).last ?? ""
            #expect(deepReply.contains("deeper than 32 levels"), "\(action): \(deepReply)")
        }
        harness.disconnect(id)
        let root = harness.engine.value(at: .root, namespace: "test")
        #expect(root.isNull, "nothing stored: \(root)")
        // At the limits exactly, the merge is taken.
        let writer = harness.connect()
        _ = harness.take(writer)
        let fits = String(repeating: "c", count: 768 - 501 - 1)
        harness.request(3, "m", #"{"p":"\#(base)","d":{"\#(fits)":1}}"#, from: writer)
        #expect(harness.take(writer).last == #"{"t":"d","d":{"r":3,"b":{"s":"ok","d":""}}}"#)
    }

    @Test func mergeIsPushedAsOneMessageToListenersAbove() {
        let harness = EngineHarness()
        let watcher = harness.connect()
        harness.request(1, "q", #"{"p":"/room","h":""}"#, from: watcher)
        _ = harness.take(watcher)
        harness.request(2, "m", #"{"p":"/room","d":{"a/x":1,"b":2}}"#, from: watcher)
        #expect(harness.take(watcher) == [
            #"{"t":"d","d":{"a":"m","b":{"p":"room","d":{"a/x":1,"b":2}}}}"#,
            #"{"t":"d","d":{"r":2,"b":{"s":"ok","d":""}}}"#,
        ])
    }

    @Test func onDisconnectRunsOnceWithTheTimeOfTheDisconnect() {
        let harness = EngineHarness()
        let alice = harness.connect()
        let watcher = harness.connect()
        harness.request(1, "o", #"{"p":"/p","d":{"online":false,"at":{".sv":"timestamp"}}}"#, from: alice)
        #expect(harness.take(alice).last == #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":""}}}"#)
        harness.request(1, "q", #"{"p":"/p","h":""}"#, from: watcher)
        _ = harness.take(watcher)
        harness.clock.advance(byMilliseconds: 1234)
        harness.disconnect(alice)
        #expect(harness.take(watcher) == [#"{"t":"d","d":{"a":"d","b":{"p":"p","d":{"at":1700000001234,"online":false}}}}"#])
        harness.disconnect(alice)
        #expect(harness.take(watcher).isEmpty)
    }

    @Test func reconnectWithLastSessionClosesTheOldOneAndRunsItsOpsFirst() {
        let harness = EngineHarness()
        let old = harness.connect()
        harness.request(1, "o", #"{"p":"/p","d":"offline"}"#, from: old)
        harness.request(2, "p", #"{"p":"/p","d":"online"}"#, from: old)
        let session = harness.sessionIDs[old]!
        let new = harness.connect(lastSession: session)
        #expect(harness.closeRequest(old)?.code == .replaced)
        harness.request(1, "g", #"{"p":"/p","q":{}}"#, from: new)
        #expect(harness.take(new).last == #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":"offline"}}}"#)
    }

    @Test func permissionDeniedRegistrationStoresNothing() {
        let harness = EngineHarness(policy: DenyWritesPolicy())
        let id = harness.connect()
        harness.request(1, "o", #"{"p":"/p","d":1}"#, from: id)
        #expect(harness.take(id).last == #"{"t":"d","d":{"r":1,"b":{"s":"permission_denied","d":"Permission denied"}}}"#)
        harness.disconnect(id)
        #expect(harness.engine.value(at: .root, namespace: "test").isNull)
    }

    @Test func unauthRevokesListensTheRulesNoLongerAllow() {
        let harness = EngineHarness(policy: ReadIfSignedInPolicy())
        let id = harness.connect()
        harness.request(1, "auth", "{\"cred\":\"\(token)\"}", from: id)
        harness.request(2, "q", #"{"p":"/users/alice","h":""}"#, from: id)
        _ = harness.take(id)
        harness.request(3, "unauth", "{}", from: id)
        #expect(harness.take(id) == [
            #"{"t":"d","d":{"r":3,"b":{"s":"ok","d":""}}}"#,
            #"{"t":"d","d":{"a":"c","b":{"p":"users/alice"}}}"#,
        ])
    }

    @Test func invalidTokenIsRefusedWithAReason() {
        let harness = EngineHarness()
        let id = harness.connect()
        _ = harness.take(id)
        harness.request(1, "auth", #"{"cred":"not-a-token"}"#, from: id)
        let reply = harness.take(id)
        #expect(reply.count == 1 && reply[0].contains(#""s":"invalid_token""#))
    }

    @Test func namespacesAreIndependent() {
        let harness = EngineHarness()
        let a = harness.connect(namespace: "a")
        let b = harness.connect(namespace: "")
        harness.request(1, "p", #"{"p":"/x","d":1}"#, from: a)
        harness.request(1, "g", #"{"p":"/x","q":{}}"#, from: b)
        #expect(harness.take(b).last == #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":null}}}"#)
        #expect(harness.engine.value(at: try! Path("/x"), namespace: "a") == Node(.number(1)))
    }
}

struct DenyWritesPolicy: AccessPolicy {
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool { true }
    func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool { false }
}

struct ReadIfSignedInPolicy: AccessPolicy {
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool { auth != nil }
    func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool { auth != nil }
}

/// Token expiry with a manual clock: the engine asks to be woken at the expiry, then revokes.
@Suite struct TokenExpiryTests {
    struct ExpiringVerifier: TokenVerifier {
        func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
            .success(.user(auth: .object([("uid", .string(credential))]), expiresAt: now + 60_000))
        }
    }

    @Test func expiredTokenPushesAuthRevokedAndDropsUnreadableListens() throws {
        let clock = ManualClock()
        var counter = 0
        let engine = Engine(verifier: ExpiringVerifier(), policy: ReadIfSignedInPolicy(), makeSessionID: {
            counter += 1
            return "s\(counter)"
        })
        let id = ConnectionID(1)
        engine.open(id, namespace: "t", lastSession: nil, host: "h", now: clock.now)
        engine.handle(NumberedRequest(number: 1, request: .auth(credential: "alice", authVariable: nil, noAuth: false)), from: id, now: clock.now)
        engine.handle(NumberedRequest(number: 2, request: .listen(path: try Path("/a"), query: nil, tag: nil)), from: id, now: clock.now)
        _ = engine.drainEffects()
        #expect(engine.nextDeadline == clock.now + 60_000)
        clock.advance(byMilliseconds: 59_999)
        engine.tick(now: clock.now)
        #expect(engine.drainEffects().isEmpty)
        clock.advance(byMilliseconds: 1)
        engine.tick(now: clock.now)
        #expect(engine.drainEffects() == [
            .send([id], .authRevoked(.expiredToken("Auth token is expired."))),
            .send([id], .listenRevoked(path: try Path("/a"), query: nil)),
        ])
        #expect(engine.nextDeadline == nil)
    }
}

@Suite struct OnDisconnectAuthTests {
    struct ShortLivedVerifier: TokenVerifier {
        func verify(_ credential: String, now: Int64) -> Result<Credentials, AuthError> {
            .success(.user(auth: .object([("uid", .string(credential))]), expiresAt: now + 1000))
        }
    }

    /// The offline write is not lost to a token that expired while the app was connected: the op
    /// runs with the credentials it was registered (and checked) with.
    @Test func opsRegisteredBeforeExpiryStillRunAfterIt() throws {
        let clock = ManualClock()
        let engine = Engine(verifier: ShortLivedVerifier(), policy: ReadIfSignedInPolicy(), makeSessionID: { "s" })
        let id = ConnectionID(1)
        engine.open(id, namespace: "t", lastSession: nil, host: "h", now: clock.now)
        engine.handle(NumberedRequest(number: 1, request: .auth(credential: "alice", authVariable: nil, noAuth: false)), from: id, now: clock.now)
        engine.handle(NumberedRequest(number: 2, request: .onDisconnectPut(path: try Path("/p"), data: "offline")), from: id, now: clock.now)
        clock.advance(byMilliseconds: 5000)
        engine.tick(now: clock.now)  // the token expires: the connection is now unauthenticated
        engine.disconnect(id, now: clock.now)
        #expect(engine.value(at: try Path("/p"), namespace: "t") == Node(.string("offline")))
    }
}
