import PresenceTesting
import Testing
@testable import PresenceCore

/// The n-th listen, onDisconnect op or re-auth of a connection must cost what the first did. These
/// tests count the work (rule checks, journalled ops) instead of timing it; `presence-bench abuse`
/// measures the time (docs/robustness.md).
@Suite struct PerConnectionCostTests {
    static let authRules = try! RuleSet.load(text: #"{"rules": {".read": "auth != null", ".write": true}}"#, source: "test")

    func listen(_ harness: EngineHarness, _ id: ConnectionID, _ count: Int, from first: Int = 0) {
        for index in first..<(first + count) { harness.request(index, "q", "{\"p\":\"/rooms/r\(index)\",\"h\":\"\"}", from: id) }
        _ = harness.take(id)
    }

    @Test func reauthenticatingWithTheSameTokenChecksNoRule() {
        let harness = EngineHarness(policy: Self.authRules)
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        listen(harness, id, 2_000)
        let checks = harness.engine.counters.ruleChecks
        for _ in 0..<100 { harness.signIn(id, as: "alice") }
        #expect(harness.engine.counters.ruleChecks == checks, "a token sent again re-checked listens")
        // Another identity: one check per listen, once.
        harness.signIn(id, as: "bob")
        #expect(harness.engine.counters.ruleChecks == checks + 2_000)
        // Signing out revokes them all at once, as before.
        harness.request(9, "unauth", "{}", from: id)
        #expect(harness.take(id).filter { $0.contains(#""a":"c""#) }.count == 2_000)
    }

    @Test func rulesWhoseReadsIgnoreAuthNeedNoRecheck() throws {
        let open = try RuleSet.load(text: #"{"rules": {".read": true, "private": {"$uid": {".write": "auth.uid === $uid"}}}}"#, source: "t")
        #expect(!open.readsDependOnAuth)
        #expect(Self.authRules.readsDependOnAuth)
        let nested = try RuleSet.load(text: #"{"rules": {"a": {"$x": {".read": "root.child('m').child(auth.uid).exists()"}}}}"#, source: "t")
        #expect(nested.readsDependOnAuth)
        let harness = EngineHarness(policy: open)
        let id = harness.connect()
        listen(harness, id, 500)
        let checks = harness.engine.counters.ruleChecks
        harness.signIn(id, as: "alice")
        harness.signIn(id, as: "bob")
        #expect(harness.engine.counters.ruleChecks == checks)
    }

    /// A connection's 600 ops are journalled as changes, not as the whole list each time: the
    /// ops written to storage in total stay proportional to n, not n²/2, and the stored session
    /// is exactly the engine's queue.
    @Test func theNthOnDisconnectOpIsJournalledAsOneChange() throws {
        let harness = EngineHarness(limits: EngineLimits(maxOnDisconnectOps: 10_000))
        harness.engine.enableJournal()
        let id = harness.connect()
        var stored = StoredState()
        var opsWritten = 0
        let total = 600
        for index in 0..<total {
            harness.request(index, "o", "{\"p\":\"/rooms/r\(index)/members/alice\",\"d\":{\"at\":{\".sv\":\"timestamp\"}}}", from: id)
            if index % 97 == 0 { harness.request(index, "oc", "{\"p\":\"/rooms/r\(index / 2)\"}", from: id) }
            let batch = try #require(harness.engine.takeJournal())
            for mutation in batch.mutations {
                switch mutation {
                case .upsertSession(let session): opsWritten += session.ops.count
                case .changeSessionOps(_, _, let changes): opsWritten += changes.count
                default: break
                }
            }
            stored.apply(batch)
        }
        #expect(opsWritten < 4 * total, "ops written to storage: \(opsWritten)")
        let live = try #require(stored.sessions.first)
        let snapshot = try #require(harness.engine.connectionSnapshots().first)
        #expect(live.ops.count == snapshot.onDisconnectOps)
        // What storage holds is what the engine runs: restore it and compare the held ops.
        harness.disconnect(id)
        #expect(harness.engine.value(at: try Path("/rooms/r599/members/alice/at"), namespace: "test") == Node(.number(Double(harness.clock.now))))
        let restored = EngineHarness(graceMilliseconds: 60_000)
        restored.engine.restore(stored, now: harness.clock.now)
        #expect(restored.engine.heldSnapshots().first?.ops == live.ops)
    }

    /// Cancels split large ops; supersede writes of a returning client cancel held ops. Both are
    /// journalled as changes, and replaying them gives the engine's queue exactly.
    @Test func heldAndLiveChangesReplayExactly() throws {
        let harness = EngineHarness(graceMilliseconds: 3_000)
        harness.engine.enableJournal()
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        var stored = StoredState()
        for index in 0..<60 {
            harness.request(index, "o", "{\"p\":\"/u/k\(index)\",\"d\":{\"a\":1,\"b\":{\"c\":\(index)},\"d\":[1,2]}}", from: id)
        }
        harness.request(100, "oc", #"{"p":"/u/k3/b/c"}"#, from: id)
        harness.request(101, "om", #"{"p":"/u","d":{"k4/a":null,"k5":{"x":true}}}"#, from: id)
        harness.request(102, "oc", #"{"p":"/u/k6/d/0"}"#, from: id)
        stored.apply(try #require(harness.engine.takeJournal()))
        let session = try #require(harness.sessionIDs[id])
        harness.disconnect(id)
        // alice writes from another connection: her held ops at those paths are superseded.
        let again = harness.connect()
        harness.signIn(again, as: "alice")
        harness.request(1, "p", #"{"p":"/u/k7/b","d":5}"#, from: again)
        harness.request(2, "m", #"{"p":"/u","d":{"k8":1,"k9/a":2}}"#, from: again)
        stored.apply(try #require(harness.engine.takeJournal()))
        let held = try #require(harness.engine.heldSnapshots().first { $0.session == session })
        #expect(stored.sessions.first { $0.sessionID == session }?.ops == held.ops)
        #expect(held.ops.contains { $0.path.description == "/u/k3/b" } == false)
        #expect(held.ops.contains { $0.path.description == "/u/k8" } == false)
    }
}

/// Memory per connection is a measured target (docs/performance.md): the per-connection records
/// must not grow by accident (an unboxed trie made every connection's queue 104 bytes).
@Suite struct ConnectionMemoryTests {
    @Test func perConnectionRecordsStaySmall() {
        #expect(MemoryLayout<OnDisconnectQueue>.size == 8)
        #expect(MemoryLayout<ListenTable>.size == 16)
        #expect(MemoryLayout<Listener>.size <= 40)
    }
}

/// The listen table against a dictionary, across the size where it starts (and stops) indexing:
/// removals move the last entry into the gap, which must keep every key findable.
@Suite struct ListenTableTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func agreesWithADictionary(_ seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        var table = ListenTable()
        var reference: [ListenKey: Listen] = [:]
        for step in 0..<3_000 {
            let query = random.int(3)  // 0: the plain listen; 1, 2: two distinct queries
            let key = ListenKey(path: Path(validated: ["p\(random.int(40))"]), queryIdentity: query == 0 ? "default" : "q\(query)")
            if random.int(3) == 0 {
                #expect((table.removeValue(forKey: key) == nil) == (reference.removeValue(forKey: key) == nil), "step \(step)")
            } else {
                let listen = Listen(listener: Listener(connection: ConnectionID(UInt64(step)), path: key.path, tag: nil),
                                    rawQuery: nil, spec: .default)
                table[key] = listen
                reference[key] = listen
            }
            #expect(table.count == reference.count)
            #expect(table.queries(at: key.path) == reference.keys.filter { $0.path == key.path && $0.queryIdentity != "default" }.count,
                    "step \(step)")
            for (key, listen) in reference where table[key]?.listener != listen.listener {
                Issue.record("step \(step): \(key.path) lost")
                return
            }
        }
    }

    /// The index (with the query counts) is a class: a copy of the table must not see the
    /// original's later changes.
    @Test func aCopyKeepsItsListensAndQueryCounts() {
        var table = ListenTable()
        let path = Path(validated: ["items"])
        func listen(_ n: Int) -> Listen {
            Listen(listener: Listener(connection: ConnectionID(UInt64(n)), path: path, tag: nil), rawQuery: nil, spec: .default)
        }
        for n in 0..<40 { table[ListenKey(path: path, queryIdentity: "q\(n)")] = listen(n) }
        let copy = table
        for n in 0..<20 { table.removeValue(forKey: ListenKey(path: path, queryIdentity: "q\(n)")) }
        table[ListenKey(path: path, queryIdentity: "q99")] = listen(99)
        #expect(copy.count == 40 && copy.queries(at: path) == 40)
        #expect(copy[ListenKey(path: path, queryIdentity: "q0")] != nil && copy[ListenKey(path: path, queryIdentity: "q99")] == nil)
        #expect(table.count == 21 && table.queries(at: path) == 21)
    }

    /// A request handler holds the connection while it changes it: the record must be a reference,
    /// or each change copies the whole listen table (what made the n-th listen cost O(n)).
    @Test func theConnectionRecordIsShared() {
        #expect(Connection.self is AnyObject.Type)
    }
}
