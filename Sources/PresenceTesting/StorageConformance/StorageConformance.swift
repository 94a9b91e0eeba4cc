import PresenceCore
import Testing

/// The checks every `StorageEngine` must pass. An engine's test target runs them, usually one test
/// case per check:
///
/// ```swift
/// @Test(arguments: StorageConformance.Check.allCases)
/// func conformance(_ check: StorageConformance.Check) throws {
///     let dir = makeTemporaryDirectory()
///     try StorageConformance(durable: true) { try SQLiteStorage(directory: dir) }.run(check)
/// }
/// ```
///
/// Every check compares what the engine loads with `StoredState.apply` (the reference semantics)
/// of the same batches, after every commit. Failures are recorded with Swift Testing's `#expect`.
public struct StorageConformance: Sendable {
    public enum Check: String, CaseIterable, Sendable, CustomStringConvertible {
        case emptyLoad
        case scriptedWrites
        case priorities
        case randomWrites
        case multipleNamespaces
        case sessions
        case rules
        case heartbeatAndSequence
        case groupCommit
        case exportImport
        case reopen
        case largeBatch
        case limitUsage

        public var description: String { rawValue }
    }

    /// Opens the engine under test. Called again after `close()` for the reopen checks, where it
    /// must open the same stored data.
    public let open: @Sendable () throws -> any StorageEngine
    /// Whether data survives `close()` and a new `open()`; the reopen checks run only then.
    public let isDurable: Bool

    public init(durable: Bool, open: @escaping @Sendable () throws -> any StorageEngine) {
        self.isDurable = durable
        self.open = open
    }

    public func runAll() throws {
        for check in Check.allCases { try run(check) }
    }

    /// The differential check alone, with another seed and length (for soak runs).
    public func runRandomWrites(seed: UInt64, commits: Int) throws {
        let harness = ConformanceHarness(engine: try open(), open: open, isDurable: isDurable)
        defer { try? harness.engine.close() }
        try harness.randomWrites(seed: seed, commits: commits)
        if isDurable { try harness.reopenEngine() }
    }

    public func run(_ check: Check) throws {
        let harness = ConformanceHarness(engine: try open(), open: open, isDurable: isDurable)
        defer { try? harness.engine.close() }
        switch check {
        case .emptyLoad: try harness.emptyLoad()
        case .scriptedWrites: try harness.scriptedWrites()
        case .priorities: try harness.priorities()
        case .randomWrites: try harness.randomWrites()
        case .multipleNamespaces: try harness.multipleNamespaces()
        case .sessions: try harness.sessions()
        case .rules: try harness.rules()
        case .heartbeatAndSequence: try harness.heartbeatAndSequence()
        case .groupCommit: try harness.groupCommit()
        case .exportImport: try harness.exportImport()
        case .reopen: try harness.reopen()
        case .largeBatch: try harness.largeBatch()
        case .limitUsage: try harness.limitUsage()
        }
    }
}

/// One engine under test and the reference state it must match.
final class ConformanceHarness {
    var engine: any StorageEngine
    let open: @Sendable () throws -> any StorageEngine
    let isDurable: Bool
    var reference = StoredState()
    var sequence: UInt64 = 0

    init(engine: any StorageEngine, open: @escaping @Sendable () throws -> any StorageEngine, isDurable: Bool) {
        self.engine = engine
        self.open = open
        self.isDurable = isDurable
    }

    // MARK: Helpers

    func commit(_ batches: [StorageBatch], sourceLocation: SourceLocation = #_sourceLocation) throws {
        try engine.commit(batches)
        reference.apply(batches)
        try verify(sourceLocation: sourceLocation)
    }

    /// One batch of writes to `namespace`, numbered.
    func write(_ writes: [(String, JSON)], namespace: String = "db", sourceLocation: SourceLocation = #_sourceLocation) throws {
        sequence += 1
        var batch = StorageBatch(sequence: sequence)
        for (path, json) in writes {
            batch.write(try node(json, at: path), at: try Path(path), namespace: namespace)
        }
        try commit([batch], sourceLocation: sourceLocation)
    }

    func write(_ path: String, _ json: JSON, namespace: String = "db", sourceLocation: SourceLocation = #_sourceLocation) throws {
        try write([(path, json)], namespace: namespace, sourceLocation: sourceLocation)
    }

    func node(_ json: JSON, at path: String) throws -> Node {
        let path = try Path(path)
        if path.last == ".priority" {
            // The engine stores what a client's `.priority` write becomes: the bare value.
            switch json {
            case .null: return .null
            case .bool(let b): return Node(.bool(b))
            case .number(let n): return Node(.number(n))
            case .string(let s): return Node(.string(s))
            default: return try Node(json: json)
            }
        }
        return try Node(json: json, at: path)
    }

    /// The engine's stored state must equal the reference, component by component.
    func verify(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let loaded = try engine.load()
        ConformanceHarness.expectEqual(loaded, reference, sourceLocation: sourceLocation)
        for (name, tree) in reference.namespaces {
            #expect(try engine.loadTree(namespace: name) == tree, "loadTree(\(name))", sourceLocation: sourceLocation)
        }
    }

    static func expectEqual(_ loaded: StoredState, _ expected: StoredState, sourceLocation: SourceLocation) {
        #expect(Set(loaded.namespaces.keys) == Set(expected.namespaces.keys), "namespaces", sourceLocation: sourceLocation)
        for (name, tree) in expected.namespaces {
            let got = loaded.namespaces[name] ?? .null
            if got != tree {
                // Export text shows the difference readably.
                #expect(got.jsonString(exportFormat: true) == tree.jsonString(exportFormat: true),
                        "tree of \(name)", sourceLocation: sourceLocation)
                #expect(got == tree, "tree of \(name)", sourceLocation: sourceLocation)
            }
        }
        #expect(loaded.rules == expected.rules, "rules", sourceLocation: sourceLocation)
        #expect(loaded.sessions == expected.sessions, "sessions", sourceLocation: sourceLocation)
        #expect(loaded.lastHeartbeat == expected.lastHeartbeat, "heartbeat", sourceLocation: sourceLocation)
        #expect(loaded.lastSequence == expected.lastSequence, "sequence", sourceLocation: sourceLocation)
        #expect(loaded.limitUsage == expected.limitUsage, "limit usage", sourceLocation: sourceLocation)
    }

    func expectTree(_ expected: JSON, namespace: String = "db", sourceLocation: SourceLocation = #_sourceLocation) throws {
        let tree = try engine.load().namespaces[namespace] ?? .null
        #expect(tree.json(exportFormat: true) == expected, sourceLocation: sourceLocation)
    }

    /// Closes the engine and opens the stored data again; everything committed must come back.
    func reopenEngine(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try engine.close()
        engine = try open()
        try verify(sourceLocation: sourceLocation)
    }

    // MARK: Checks

    func emptyLoad() throws {
        #expect(try engine.load() == StoredState())
        #expect(try engine.load().isEmpty)
        #expect(try engine.loadTree(namespace: "db") == .null)
        try engine.commit([])
        try engine.commit(StorageBatch())
        #expect(try engine.load() == StoredState())
    }

    func scriptedWrites() throws {
        try write("/", ["users": ["alice": ["name": "Alice", "age": 30], "bob": ["name": "Bob"]]])
        try expectTree(["users": ["alice": ["age": 30, "name": "Alice"], "bob": ["name": "Bob"]]])
        // Overwrite a leaf, replace a subtree, add a sibling.
        try write("/users/alice/age", 31)
        try write("/users/bob", ["name": "Robert", "online": true])
        try write("/users/carol", ["name": "Carol", "tags": ["a", "b"]])
        try expectTree(["users": [
            "alice": ["age": 31, "name": "Alice"],
            "bob": ["name": "Robert", "online": true],
            "carol": ["name": "Carol", "tags": ["0": "a", "1": "b"]],
        ]])
        // Delete a leaf, a subtree; emptied parents vanish.
        try write("/users/carol/tags/0", nil)
        try write("/users/carol/tags/1", nil)
        try write("/users/bob", nil)
        try expectTree(["users": ["alice": ["age": 31, "name": "Alice"], "carol": ["name": "Carol"]]])
        // Write below an existing leaf: the leaf becomes a branch.
        try write("/users/carol/name/first", "Carol")
        try expectTree(["users": ["alice": ["age": 31, "name": "Alice"], "carol": ["name": ["first": "Carol"]]]])
        // Replace a branch with a leaf, then delete below a leaf (nothing happens).
        try write("/users/carol", "gone soon")
        try write("/users/carol/name", nil)
        try expectTree(["users": ["alice": ["age": 31, "name": "Alice"], "carol": "gone soon"]])
        // Keys that share prefixes, sort around the path separator, or are not ASCII.
        try write([("/k/a", 1), ("/k/ab", 2), ("/k/a b", 3), ("/k/a!", 4), ("/k/é", 5), ("/k/日本", 6), ("/k/a/x", 7)])
        try write("/k/a", nil)
        // Canonically equivalent keys are one key, as in `Node`: the decomposed write replaces.
        try write("/k/e\u{301}", 8)
        try expectTree([
            "k": ["ab": 2, "a b": 3, "a!": 4, "\u{E9}": 8, "日本": 6],
            "users": ["alice": ["age": 31, "name": "Alice"], "carol": "gone soon"],
        ])
        // Every leaf type, including awkward values.
        try write("/values", [
            "t": true, "f": false, "zero": 0, "int": -42, "big": 9_007_199_254_740_993.0, "huge": 1e300,
            "frac": 0.1, "tiny": .number(-Double.leastNonzeroMagnitude), "empty": "", "nul": "a\u{0}b", "quote": "\"\\\n", "emoji": "🙂",
        ])
        // A root leaf, then the root again as a tree.
        try write("/", "root leaf")
        try expectTree("root leaf")
        try write("/a/b", 1)
        try expectTree(["a": ["b": 1]])
        try write("/", nil)
        try expectTree(nil)
    }

    func priorities() throws {
        try write("/", [
            "a": [".value": 1, ".priority": 5],
            "b": ["x": 1, ".priority": "high"],
            "c": ["y": ["z": true, ".priority": 2.5]],
        ])
        // Priority writes on a leaf, a branch, a missing node, and a branch without one.
        try write("/a/.priority", "s")
        try write("/b/.priority", 7)
        try write("/missing/.priority", 3)
        try write("/c/.priority", 1)
        try write("/c/y/.priority", nil)
        try expectTree([
            "a": [".value": 1, ".priority": "s"],
            "b": ["x": 1, ".priority": 7],
            "c": ["y": ["z": true], ".priority": 1],
        ])
        // A bool priority clears it; a leaf becoming a branch keeps its priority.
        try write("/b/.priority", true)
        try write("/a/child", "c")
        try expectTree([
            "a": ["child": "c", ".priority": "s"],
            "b": ["x": 1],
            "c": ["y": ["z": true], ".priority": 1],
        ])
        // Emptying a branch drops its priority; recreating it does not bring it back.
        try write("/c/y/z", nil)
        try write("/c/y/z", 1)
        try expectTree([
            "a": ["child": "c", ".priority": "s"],
            "b": ["x": 1],
            "c": ["y": ["z": 1]],
        ])
        // A priority write below a primitive: null does nothing, a value deletes the primitive.
        try write("/p/q", 1)
        try write("/p/q/r/.priority", nil)
        try write("/p/.priority", 9)
        try write("/p/q/r/.priority", 4)
        try expectTree([
            "a": ["child": "c", ".priority": "s"],
            "b": ["x": 1],
            "c": ["y": ["z": 1]],
        ])
        // The root's priority.
        try write("/.priority", 10)
        try write("/", [".value": "leaf", ".priority": 1])
        try write("/.priority", "r")
        try expectTree([".value": "leaf", ".priority": "r"])
    }

    func randomWrites(seed: UInt64 = 0x5eed, commits total: Int = 150) throws {
        var random = ConformanceRandom(seed: seed)
        var commits = 0
        while commits < total {
            var batches: [StorageBatch] = []
            for _ in 0..<random.int(1...3) {
                sequence += 1
                var batch = StorageBatch(sequence: sequence)
                for _ in 0..<random.int(1...6) {
                    let (path, value) = ConformanceRandomWrites.write(&random)
                    batch.write(value, at: path, namespace: random.chance(0.8) ? "db" : "other")
                }
                batches.append(batch)
            }
            try commit(batches)
            commits += 1
        }
    }

    func multipleNamespaces() throws {
        try write("/users/a", 1, namespace: "one")
        try write("/users/a", 2, namespace: "two")
        try write("/", ["x": 1], namespace: "three")
        try write("/", nil, namespace: "one")
        try expectTree(nil, namespace: "one")
        try expectTree(["users": ["a": 2]], namespace: "two")
        #expect(try Set(engine.load().namespaces.keys) == ["two", "three"])
        #expect(try engine.loadTree(namespace: "one") == .null)
        #expect(try engine.loadTree(namespace: "never") == .null)
    }

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

    func largeBatch() throws {
        let users = 20_000
        var members: [(String, JSON)] = []
        members.reserveCapacity(users)
        for index in 0..<users {
            members.append(("user\(index)", ["name": .string("User \(index)"), "online": .bool(index % 2 == 0),
                                             "score": .number(Double(index) * 1.5), "seen": .number(Double(1_700_000_000_000 + index))]))
        }
        try write("/users", .object(members))
        #expect(try engine.load().namespaces["db"]?.nodeCount == 2 + users * 5)
        // Replace a large subtree with a small one, then grow it back in many small batches.
        try write("/users", ["user1": ["name": "only"]])
        var batch = StorageBatch()
        for index in 0..<2_000 {
            batch.write(Node(.bool(true)), at: try Path("/users/user\(index)/online"), namespace: "db")
        }
        try commit([batch])
        #expect(try engine.load().namespaces["db"]?.nodeCount == 2 + 2_000 * 2 + 1)
        if isDurable { try reopenEngine() }
    }
}

/// Random paths and values for the differential check: few distinct keys so that writes overlap,
/// keys chosen to sort around one another.
enum ConformanceRandomWrites {
    /// "é" twice: precomposed and decomposed, which Swift (and so `Node`) treats as one key.
    static let keys = ["a", "ab", "a b", "a!", "b", "0", "1", "10", "-1", "\u{E9}", "e\u{301}", "日本", "z~"]

    static func write(_ random: inout ConformanceRandom) -> (Path, Node) {
        let depth = random.chance(0.03) ? 0 : random.int(1...4)
        var segments: [String] = []
        for _ in 0..<depth { segments.append(keys[random.int(0...keys.count - 1)]) }
        if random.chance(0.15) {
            segments.append(".priority")
            let value: Node = switch random.int(0...3) {
            case 0: .null
            case 1: Node(.number(Double(random.int(-5...5))))
            case 2: Node(.string(keys[random.int(0...keys.count - 1)]))
            default: Node(.bool(true))
            }
            return (Path(validated: segments), value)
        }
        let value: Node = random.chance(0.3) ? .null : node(&random, depth: random.int(0...2))
        return (Path(validated: segments), value)
    }

    static func node(_ random: inout ConformanceRandom, depth: Int) -> Node {
        let priority: Priority? = switch random.int(0...5) {
        case 0: .number(Double(random.int(0...3)))
        case 1: .string("p\(random.int(0...3))")
        default: nil
        }
        if depth == 0 || random.chance(0.4) {
            let leaf: Leaf = switch random.int(0...5) {
            case 0: .bool(random.chance(0.5))
            case 1: .number(Double(random.int(-100...100)))
            case 2: .number(Double(random.int(-100...100)) / 8 + 0.1)
            case 3: .string("")
            case 4: .string("v\u{0}\(random.int(0...9))")
            default: .string("value \(random.int(0...99))")
            }
            return .leaf(leaf, priority: priority)
        }
        var children: [String: Node] = [:]
        for _ in 0..<random.int(1...3) {
            children[keys[random.int(0...keys.count - 1)]] = node(&random, depth: depth - 1)
        }
        return .branch(children, priority: priority)
    }
}

/// A small deterministic generator, so that a failure reproduces.
struct ConformanceRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    mutating func chance(_ probability: Double) -> Bool {
        Double(next() % 1_000_000) / 1_000_000 < probability
    }
}
