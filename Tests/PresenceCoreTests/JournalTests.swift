import PresenceCore
import PresenceTesting
import Testing

/// Durability seen from the core: the journal an engine hands to storage, applied to a
/// `StoredState` (the reference semantics every storage engine reproduces), restores a new engine
/// to the same data, and turns the sessions of a crashed run into held ops with no ghosts left.
@Suite struct JournalTests {
    func token(_ uid: String) -> String {
        Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array("{\"sub\":\"\(uid)\"}".utf8)) + "."
    }

    func online(_ harness: EngineHarness, _ uid: String) -> ConnectionID {
        let id = harness.connect()
        harness.request(1, "auth", "{\"cred\":\"\(token(uid))\"}", from: id)
        harness.request(2, "o", "{\"p\":\"/users/\(uid)/presence\",\"d\":{\"online\":false,\"lastSeen\":{\".sv\":\"timestamp\"}}}", from: id)
        harness.request(3, "p", "{\"p\":\"/users/\(uid)/presence\",\"d\":{\"online\":true,\"lastSeen\":{\".sv\":\"timestamp\"}}}", from: id)
        return id
    }

    @Test func aCrashedRunIsRestoredWithItsSessionsHeldAndNoGhosts() throws {
        let before = EngineHarness(graceMilliseconds: 3000)
        before.engine.enableJournal()
        var stored = StoredState()
        let alice = online(before, "alice")
        _ = online(before, "bob")
        stored.apply(before.engine.takeJournal()!)
        let aliceSession = before.sessionIDs[alice]!
        // The last heartbeat the dead server wrote; then it crashed (no disconnects recorded).
        stored.apply(StorageBatch(mutations: [.heartbeat(before.clock.now + 500)]))
        #expect(stored.sessions.count == 2 && stored.sessions.allSatisfy { $0.disconnectedAt == nil })

        let clock = ManualClock(now: before.clock.now + 10_000)
        let after = EngineHarness(clock: clock, graceMilliseconds: 3000)
        after.engine.enableJournal()
        after.engine.restore(stored, now: clock.now)
        #expect(after.engine.value(at: try Path("/users/alice/presence/online"), namespace: "test") == Node(.bool(true)))
        #expect(after.engine.heldSessionCount == 2)

        let watcher = after.connect()
        after.request(1, "q", #"{"p":"/users","h":""}"#, from: watcher)
        _ = after.take(watcher)
        // alice comes back in time, naming her old session; bob does not.
        let back = after.connect(lastSession: aliceSession)
        after.request(1, "auth", "{\"cred\":\"\(token("alice"))\"}", from: back)
        #expect(after.engine.heldSessionCount == 1)
        #expect(after.engine.nextDeadline == clock.now + 3000)
        after.advance(byMilliseconds: 3000)
        #expect(after.engine.heldSessionCount == 0)
        let pushes = after.take(watcher)
        #expect(pushes == [
            "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":\"users/bob/presence\",\"d\":{\"lastSeen\":\(before.clock.now + 500),\"online\":false}}}}",
        ])
        stored.apply(after.engine.takeJournal()!)
        #expect(stored.sessions.isEmpty)
        #expect(stored.namespaces["test"]?.node(at: try Path("/users/bob/presence/online")) == Node(.bool(false)))
    }

    @Test func journalOrderMatchesTheEngineAndRulesSurvive() throws {
        let harness = EngineHarness()
        harness.engine.enableJournal()
        let id = harness.connect()
        harness.request(1, "p", #"{"p":"/a","d":{"x":1}}"#, from: id)
        harness.request(2, "m", #"{"p":"/a","d":{"y":2,"x":null}}"#, from: id)
        let rules = try RuleSet.load(text: #"{"rules":{".read":true}}"#, source: "test")
        harness.engine.setRules(rules, text: #"{"rules":{".read":true}}"#, namespace: "test", now: harness.clock.now)
        let batch = try #require(harness.engine.takeJournal())
        #expect(batch.sequence == 1)
        #expect(harness.engine.takeJournal() == nil)
        var stored = StoredState()
        stored.apply(batch)
        #expect(stored.namespaces["test"]?.jsonString() == #"{"a":{"y":2}}"#)
        let restored = EngineHarness()
        restored.engine.restore(stored, now: 0)
        let reader = restored.connect()
        restored.request(1, "p", #"{"p":"/b","d":1}"#, from: reader)
        #expect(restored.take(reader).last?.contains("permission_denied") == true)
    }
}
