import PresenceCore
import Testing

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
}
