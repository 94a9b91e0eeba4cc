import PresenceCore
import PresenceTesting
import Testing

/// The 3-second disconnect grace window with a manual clock.
@Suite struct GraceWindowTests {
    static func token(_ uid: String) -> String {
        func part(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }
        return part(#"{"alg":"none"}"#) + "." + part("{\"sub\":\"\(uid)\"}") + "."
    }

    /// alice online with an offline onDisconnect; a watcher listening to her presence.
    func setUp(_ harness: EngineHarness) -> (alice: ConnectionID, watcher: ConnectionID) {
        let alice = harness.connect()
        harness.request(1, "auth", "{\"cred\":\"\(Self.token("alice"))\"}", from: alice)
        harness.request(2, "o", #"{"p":"/users/alice/presence","d":{"online":false,"lastSeen":{".sv":"timestamp"}}}"#, from: alice)
        harness.request(3, "p", #"{"p":"/users/alice/presence","d":{"online":true,"lastSeen":{".sv":"timestamp"}}}"#, from: alice)
        let watcher = harness.connect()
        harness.request(1, "q", #"{"p":"/users/alice/presence","h":""}"#, from: watcher)
        _ = harness.take(watcher)
        return (alice, watcher)
    }

    @Test func aClientThatComesBackWithLsInTimeProducesNoOfflineEvent() {
        let harness = EngineHarness(graceMilliseconds: 3000)
        let (alice, watcher) = setUp(harness)
        let session = harness.sessionIDs[alice]!
        harness.disconnect(alice)
        harness.advance(byMilliseconds: 1500)
        let back = harness.connect(lastSession: session)
        harness.request(1, "auth", "{\"cred\":\"\(Self.token("alice"))\"}", from: back)
        harness.advance(byMilliseconds: 5000)
        #expect(harness.take(watcher).isEmpty)
        #expect(harness.engine.heldSessionCount == 0)
    }

    @Test func aClientThatDoesNotComeBackGoesOfflineOnceWithTheDropTime() {
        let harness = EngineHarness(graceMilliseconds: 3000)
        let (alice, watcher) = setUp(harness)
        harness.advance(byMilliseconds: 700)
        harness.disconnect(alice)  // at +700 ms
        harness.advance(byMilliseconds: 2999)
        #expect(harness.take(watcher).isEmpty)
        harness.advance(byMilliseconds: 1)
        #expect(harness.take(watcher) == [
            #"{"t":"d","d":{"a":"d","b":{"p":"users/alice/presence","d":{"lastSeen":1700000000700,"online":false}}}}"#,
        ])
        harness.advance(byMilliseconds: 10_000)
        #expect(harness.take(watcher).isEmpty)
    }

    @Test func anotherUserPresentingTheSessionCannotCancelTheOps() {
        let harness = EngineHarness(graceMilliseconds: 3000)
        let (alice, watcher) = setUp(harness)
        let session = harness.sessionIDs[alice]!
        harness.disconnect(alice)
        let mallory = harness.connect(lastSession: session)
        harness.request(1, "auth", "{\"cred\":\"\(Self.token("mallory"))\"}", from: mallory)
        harness.advance(byMilliseconds: 3000)
        #expect(harness.take(watcher).count == 1)
    }

    @Test func aWriteByTheSameUserToTheHeldLocationSupersedesIt() {
        let harness = EngineHarness(graceMilliseconds: 3000)
        let (alice, watcher) = setUp(harness)
        harness.disconnect(alice)
        // A new connection without ls (another tab, or a client that lost its session id).
        let again = harness.connect()
        harness.request(1, "auth", "{\"cred\":\"\(Self.token("alice"))\"}", from: again)
        harness.request(2, "p", #"{"p":"/users/alice/presence","d":{"online":true,"lastSeen":{".sv":"timestamp"}}}"#, from: again)
        _ = harness.take(watcher)  // the echo of that write
        harness.advance(byMilliseconds: 4000)
        #expect(harness.take(watcher).isEmpty)
    }

    @Test func multiDeviceRecipeIsKeyedBySession() {
        let harness = EngineHarness(graceMilliseconds: 3000)
        let phone = harness.connect()
        let laptop = harness.connect()
        for (device, key) in [(phone, "phone"), (laptop, "laptop")] {
            harness.request(1, "auth", "{\"cred\":\"\(Self.token("alice"))\"}", from: device)
            harness.request(2, "o", "{\"p\":\"/users/alice/connections/\(key)\",\"d\":null}", from: device)
            harness.request(3, "p", "{\"p\":\"/users/alice/connections/\(key)\",\"d\":true}", from: device)
        }
        let watcher = harness.connect()
        harness.request(1, "q", #"{"p":"/users/alice/connections","h":""}"#, from: watcher)
        _ = harness.take(watcher)
        harness.disconnect(phone)
        // The laptop keeps writing its own entry: that must not cancel the phone's removal.
        harness.request(4, "p", #"{"p":"/users/alice/connections/laptop","d":true}"#, from: laptop)
        _ = harness.take(watcher)
        harness.advance(byMilliseconds: 3000)
        #expect(harness.take(watcher) == [#"{"t":"d","d":{"a":"d","b":{"p":"users/alice/connections/phone","d":null}}}"#])
        #expect(harness.engine.value(at: try! Path("/users/alice/connections"), namespace: "test").jsonString() == #"{"laptop":true}"#)
    }

    @Test func zeroGraceRunsTheOpsAtOnce() {
        let harness = EngineHarness(graceMilliseconds: 0)
        let (alice, watcher) = setUp(harness)
        harness.disconnect(alice)
        #expect(harness.take(watcher).count == 1)
    }
}
