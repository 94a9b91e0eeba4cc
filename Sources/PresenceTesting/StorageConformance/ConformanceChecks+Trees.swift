import PresenceCore
import Testing

/// Checks of stored trees: writes, priorities, namespaces, the differential check, large batches.
extension ConformanceHarness {
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
        var random = SeededRandom(seed: seed)
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
