import PresenceCore
import Testing

/// Checks of everything stored besides trees (sessions, rules, heartbeat, limit usage), group commit,
/// export and import, and reopening.
extension ConformanceHarness {
    func sessions() throws {
        let user = Credentials.user(auth: ["uid": "u1", "provider": "password", "token": ["email": "u1@example.com", "nested": [1, 2.5, nil, true]]],
                                    expiresAt: 1_700_000_000_123)
        let ops = [
            OnDisconnectOp(path: try Path("/status/u1"), value: ["state": "offline", "lastSeen": [".sv": "timestamp"]], credentials: user),
            OnDisconnectOp(path: try Path("/counters/online"), value: [".sv": ["increment": -1]], credentials: .admin),
            OnDisconnectOp(path: try Path("/rooms/r1/members/u1"), value: nil, credentials: .unauthenticated),
            OnDisconnectOp(path: .root, value: ["a": [1, "two", ["three": 3]], "s": "é\"\\\n\u{1}"], credentials: .user(auth: ["uid": "x"], expiresAt: nil)),
            OnDisconnectOp(path: try Path("/p/.priority"), value: 5, credentials: .user(auth: "odd auth", expiresAt: Int64.max)),
            OnDisconnectOp(path: try Path("/neg"), value: -0.5, credentials: .user(auth: [:], expiresAt: Int64.min)),
        ]
        let live = StoredSession(sessionID: "s1", namespace: "db", identity: "u1", ops: ops)
        let ended = StoredSession(sessionID: "s0", namespace: "other", identity: "admin", ops: [ops[1]],
                                  disconnectedAt: 1_700_000_000_000, runAt: 1_700_000_060_000)
        let empty = StoredSession(sessionID: "s2", namespace: "db", identity: "", ops: [])
        var batch = StorageBatch()
        batch.upsert(live)
        batch.upsert(ended)
        batch.upsert(empty)
        try commit([batch])
        #expect(try engine.load().sessions.map(\.sessionID) == ["s0", "s1", "s2"])
        #expect(try engine.load().sessions[1] == live)

        // Replace: new ops, now disconnected.
        var replaced = live
        replaced.ops = Array(ops.prefix(2))
        replaced.disconnectedAt = 1_700_000_001_000
        replaced.runAt = 1_700_000_001_000
        try commit([StorageBatch(mutations: [.upsertSession(replaced)])])
        try commit([StorageBatch(mutations: [.removeSession(sessionID: "s0"), .removeSession(sessionID: "absent")])])
        #expect(try engine.load().sessions == [replaced, empty])

        // After a crash, live sessions count as disconnected at the last heartbeat.
        try commit([StorageBatch(mutations: [.heartbeat(1_700_000_002_000)])])
        let recovered = try engine.load().sessionsAfterCrash(fallback: 0)
        #expect(recovered.map(\.disconnectedAt) == [1_700_000_001_000, 1_700_000_002_000])

        // The coding on its own: every op and credential round-trips through JSON text.
        for session in [live, ended, empty, replaced] {
            let text = JSONWriter.string(StorageCoding.json(session))
            #expect(try StorageCoding.session(JSONParser.parse(text)) == session)
        }
    }

    /// Changes journalled for a large queue (`changeSessionOps`): applied to the stored session in
    /// order, across commits, group commits, a whole upsert in between, a removal, and a reopen.
    func sessionChanges() throws {
        let alice = Credentials.user(auth: ["uid": "alice"], expiresAt: 1_700_000_000_000)
        func value(_ n: Int) -> JSON { ["online": false, "room": ["id": .number(Double(n)), "at": [".sv": "timestamp"]]] }
        let base = (0..<40).map { OnDisconnectOp(path: Path(validated: ["rooms", "r\($0)", "alice"]), value: value($0), credentials: alice) }
        let big = StoredSession(sessionID: "big", namespace: "db", identity: "uid:alice", ops: base)
        let small = StoredSession(sessionID: "small", namespace: "db", identity: "anonymous",
                                  ops: [OnDisconnectOp(path: try Path("/x"), value: 1, credentials: .unauthenticated)])
        try commit([StorageBatch(mutations: [.upsertSession(big), .upsertSession(small)])])
        var random = SeededRandom(seed: 0x0D15C0)
        for round in 0..<40 {
            var changes: [OnDisconnectChange] = []
            for _ in 0..<random.int(1...4) {
                let room = Path(validated: ["rooms", "r\(random.int(0...49))"])
                if random.chance(0.35) {
                    // A cancel below an op splits it; one at or above an op forgets it.
                    let below = random.chance(0.5) ? ["alice", "room", "id"] : []
                    changes.append(.cancel(Path(validated: room.segments + below)))
                } else {
                    let credentials = random.chance(0.5) ? alice : .admin
                    changes.append(.set(OnDisconnectOp(path: room.child("alice"), value: value(round), credentials: credentials)))
                }
            }
            sequence += 1
            let identity = round % 3 == 0 ? "uid:alice" : "uid:alice2"
            try commit([StorageBatch(sequence: sequence, mutations: [.changeSessionOps(sessionID: "big", identity: identity, changes: changes)])])
            if round == 15, let current = reference.sessions.first(where: { $0.sessionID == "big" }) {
                // Stored whole again (as the core does once changes outnumber ops): earlier changes are folded in.
                try commit([StorageBatch(mutations: [.upsertSession(current)])])
            }
            if round == 25, isDurable { try reopenEngine() }
        }
        // Group commits of a burst (a connection registering many ops at once): consecutive changes of
        // one session, another session's between them, an identity that changes, a whole upsert and
        // a removal in the middle of a group; each group must load as if committed one by one.
        for _ in 0..<12 {
            var group: [StorageBatch] = []
            for _ in 0..<random.int(1...30) {
                sequence += 1
                let session = random.chance(0.8) ? "big" : "small"
                let room = Path(validated: ["rooms", "r\(random.int(0...49))"])
                let change: OnDisconnectChange = random.chance(0.3)
                    ? .cancel(room) : .set(OnDisconnectOp(path: room.child("alice"), value: value(random.int(0...9)), credentials: alice))
                var mutations: [StorageMutation] = [.changeSessionOps(sessionID: session, identity: random.chance(0.9) ? "uid:alice" : "uid:other",
                                                                      changes: [change])]
                if random.chance(0.04), let current = reference.sessions.first(where: { $0.sessionID == session }) {
                    mutations.append(.upsertSession(current))
                } else if random.chance(0.02) {
                    mutations.append(.removeSession(sessionID: "small"))
                }
                group.append(StorageBatch(sequence: sequence, mutations: mutations))
            }
            try commit(group)
        }
        // Changes for a session that is not stored change nothing.
        try commit([StorageBatch(mutations: [.changeSessionOps(sessionID: "absent", identity: "x", changes: [.cancel(.root)])])])
        // One group commit: a change, the removal, a new session and its changes.
        try commit([
            StorageBatch(sequence: 100, mutations: [.changeSessionOps(sessionID: "big", identity: "uid:alice", changes: [.cancel(try Path("/rooms/r1"))])]),
            StorageBatch(sequence: 101, mutations: [.removeSession(sessionID: "big")]),
            StorageBatch(sequence: 102, mutations: [.upsertSession(StoredSession(sessionID: "big", namespace: "db", identity: "uid:alice", ops: base))]),
            StorageBatch(sequence: 103, mutations: [.changeSessionOps(sessionID: "big", identity: "uid:alice", changes: [.cancel(try Path("/rooms/r2/alice/room"))])]),
        ])
        #expect(try engine.load().sessions.first { $0.sessionID == "big" }?.ops.count == 40)
        if isDurable { try reopenEngine() }
    }

    func rules() throws {
        let document = #"{"rules": {".read": "auth != null", "users": {"$uid": {".write": "$uid === auth.uid"}}}}"#
        try commit([StorageBatch(mutations: [.setRules(namespace: "db", document: document)])])
        try commit([StorageBatch(mutations: [.setRules(namespace: "other", document: "{\"rules\": {}}\n// ü\u{0}")])])
        #expect(try engine.load().rules == ["db": document, "other": "{\"rules\": {}}\n// ü\u{0}"])
        try commit([StorageBatch(mutations: [.setRules(namespace: "db", document: "{}"), .setRules(namespace: "other", document: nil)])])
        #expect(try engine.load().rules == ["db": "{}"])
        // Rules without data do not create a tree.
        #expect(try engine.load().namespaces.isEmpty)
    }

    func heartbeatAndSequence() throws {
        try commit([StorageBatch(mutations: [.heartbeat(1000)])])
        #expect(try engine.load().lastHeartbeat == 1000)
        #expect(try engine.load().lastSequence == nil)
        try commit([StorageBatch(sequence: 7, mutations: [.heartbeat(2000)]), StorageBatch(mutations: [.heartbeat(1500)])])
        #expect(try engine.load().lastHeartbeat == 1500)
        #expect(try engine.load().lastSequence == 7)
        try commit([StorageBatch(sequence: UInt64.max)])
        #expect(try engine.load().lastSequence == UInt64.max)
        try commit([StorageBatch(sequence: 8, mutations: [.heartbeat(-1)])])
        #expect(try engine.load().lastSequence == 8)
        #expect(try engine.load().lastHeartbeat == -1)
    }

    func limitUsage() throws {
        let alice = LimitUsageKey(namespace: "db", limit: "refresh", uid: "alice")
        let bob = LimitUsageKey(namespace: "db", limit: "refresh", uid: "bob")
        let other = LimitUsageKey(namespace: "other", limit: "refresh", uid: "alice")
        try commit([StorageBatch(mutations: [.setLimitUsage(alice, LimitUsage(count: 1))])])
        try commit([StorageBatch(mutations: [
            .setLimitUsage(alice, LimitUsage(count: 2, cooldownStartedAt: 1_700_000_000_123)),
            .setLimitUsage(bob, LimitUsage(count: 1)), .setLimitUsage(other, LimitUsage(count: 3, cooldownStartedAt: -5)),
        ])])
        #expect(try engine.load().limitUsage[alice] == LimitUsage(count: 2, cooldownStartedAt: 1_700_000_000_123))
        // nil and the unused value both forget the row; forgetting an unknown key is harmless.
        try commit([StorageBatch(mutations: [
            .setLimitUsage(bob, nil), .setLimitUsage(other, .unused),
            .setLimitUsage(LimitUsageKey(namespace: "db", limit: "x", uid: "nobody"), nil),
        ])])
        #expect(try engine.load().limitUsage == [alice: LimitUsage(count: 2, cooldownStartedAt: 1_700_000_000_123)])
        // Usage alone creates no tree.
        #expect(try engine.load().namespaces.isEmpty)
        if isDurable { try reopenEngine() }
    }

    func groupCommit() throws {
        let session = StoredSession(sessionID: "s", namespace: "db", identity: "u", ops: [])
        let batches = [
            StorageBatch(sequence: 1, mutations: [.write(namespace: "db", path: try Path("/a"), value: Node(.number(1))), .upsertSession(session)]),
            StorageBatch(sequence: 2, mutations: [.write(namespace: "db", path: try Path("/a/b"), value: Node(.number(2)))]),
            StorageBatch(sequence: 3, mutations: [.removeSession(sessionID: "s"), .write(namespace: "db", path: try Path("/a/c"), value: Node(.string("c")))]),
            StorageBatch(sequence: 4, mutations: [.write(namespace: "db", path: try Path("/a/b"), value: .null), .upsertSession(session)]),
        ]
        try commit(batches)
        try expectTree(["a": ["c": "c"]])
        #expect(try engine.load().sessions == [session])
        #expect(try engine.load().lastSequence == 4)
    }

    func exportImport() throws {
        try write("/", ["users": ["a": ["name": "A", ".priority": 1], "b": [".value": true, ".priority": "x"]], "list": [1, 2]])
        let usageKey = LimitUsageKey(namespace: "db", limit: "refresh", uid: "a")
        try commit([StorageBatch(mutations: [.setRules(namespace: "db", document: "{\"rules\":{}}"),
                                             .setLimitUsage(usageKey, LimitUsage(count: 2, cooldownStartedAt: 1_700_000_000_000))])])
        let exported = try StorageExport.exportNamespace("db", from: engine)
        #expect(exported == reference.namespaces["db"]!.json(exportFormat: true))
        let text = JSONWriter.string(exported)

        // Into another namespace, through JSON text.
        let batch = try StorageExport.importBatch(namespace: "copy", json: JSONParser.parse(text))
        try commit([batch])
        #expect(try engine.loadTree(namespace: "copy") == engine.loadTree(namespace: "db"))

        // The whole database.
        let database = try StorageExport.exportDatabase(from: engine)
        let reparsed = try JSONParser.parse(JSONWriter.string(database))
        try commit([StorageBatch(mutations: [.write(namespace: "db", path: .root, value: .null),
                                             .write(namespace: "copy", path: .root, value: .null),
                                             .setRules(namespace: "db", document: nil), .setLimitUsage(usageKey, nil)])])
        #expect(try engine.load().namespaces.isEmpty)
        try commit([try StorageExport.importBatch(database: reparsed)])
        #expect(try engine.load().namespaces.keys.sorted() == ["copy", "db"])
        #expect(try engine.load().rules == ["db": "{\"rules\":{}}"])
        #expect(try engine.load().limitUsage == [usageKey: LimitUsage(count: 2, cooldownStartedAt: 1_700_000_000_000)])
        #expect(throws: StorageExport.ImportError.self) { try StorageExport.importBatch(database: ["format": "other"]) }
        #expect(throws: StorageExport.ImportError.self) { try StorageExport.importBatch(namespace: "x", json: ["bad.key": 1]) }
    }

    func reopen() throws {
        guard isDurable else { return }
        try write("/users", ["a": ["name": "A", ".priority": 3], "b": "B"])
        try write("/x/y/.priority", 1)
        try write("/other", [".value": 1.5, ".priority": "p"], namespace: "second")
        var batch = StorageBatch(sequence: 99)
        batch.upsert(StoredSession(sessionID: "s", namespace: "db", identity: "u",
                                   ops: [OnDisconnectOp(path: try Path("/status"), value: [".sv": "timestamp"], credentials: .admin)]))
        batch.setRules("{\"rules\":{\".read\":true}}", namespace: "db")
        batch.heartbeat(123_456)
        try commit([batch])
        try reopenEngine()
        // Writing after a reopen (known and new namespaces), then reopening again.
        try write("/users/c", "C")
        try write("/fresh", 1, namespace: "third")
        try write("/users/a", nil)
        try reopenEngine()
        try reopenEngine()
    }
}
