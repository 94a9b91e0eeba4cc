import Testing
import PresenceCore
import PresenceTesting

@Suite("Version window")
struct VersionWindowTests {
    /// The definition: a read set holds from `base` to `head` iff no write of a revision in
    /// `(base, head]` conflicts with it (`ReadSet.conflicts(with:)`), checked one by one.
    struct Reference {
        var history: [(rev: UInt64, writes: [WrittenPath])] = []

        func validate(_ readSet: ReadSet, base: UInt64, floor: UInt64, head: UInt64, start: UInt64) -> VersionWindow.Validation {
            guard base >= floor, base <= head else { return .outOfWindow }
            if base < head, base < start { return .missingHistory }
            for entry in history where entry.rev > base && entry.rev <= head {
                if entry.writes.contains(where: readSet.conflicts(with:)) { return .conflict }
            }
            return .valid
        }
    }

    static let keys = ["a", "b", "c"]

    static func randomPath(_ random: inout SeededRandom) -> Path {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return VirtualPaths.rules
        case 1: return VirtualPaths.limitUsage(limit: keys.randomElement(using: &random)!, uid: "u")
        default:
            return Path(validated: (0..<Int.random(in: 0...4, using: &random)).map { _ in keys.randomElement(using: &random)! })
        }
    }

    static func randomWrite(_ random: inout SeededRandom) -> WrittenPath {
        let path = randomPath(&random)
        return WrittenPath(path: path, reshapedFrom: Int.random(in: 0...path.count, using: &random))
    }

    static func randomReadSet(_ random: inout SeededRandom) -> ReadSet {
        var readSet = ReadSet()
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            readSet.insert(randomPath(&random), Bool.random(using: &random) ? .shape : .subtree)
        }
        return readSet
    }

    @Test func agreesWithTheDefinitionOnRandomHistories() throws {
        for seed in UInt64(0)..<60 {
            var random = SeededRandom(seed: seed)
            let capacity: UInt64 = [0, 1, 3, 10, 40, 10_000][Int(seed % 6)]
            let start: UInt64 = seed % 4 == 0 ? 0 : 1_000
            let window = VersionWindow(capacity: capacity, head: start)
            var reference = Reference()
            for rev in (start + 1)...(start + 150) {
                let writes = (0..<Int.random(in: 0...3, using: &random)).map { _ in Self.randomWrite(&random) }
                try window.record(writes, rev: rev)
                reference.history.append((rev, writes))
                #expect(window.floor == (rev >= capacity ? rev - capacity : 0))
                for _ in 0..<6 {
                    let readSet = Self.randomReadSet(&random)
                    let low = window.floor >= 2 ? window.floor - 2 : 0
                    let base = UInt64.random(in: low...(rev + 1), using: &random)
                    let expected = reference.validate(readSet, base: base, floor: window.floor, head: rev, start: start)
                    #expect(window.validate(readSet, base: base) == expected,
                            "seed \(seed) capacity \(capacity) head \(rev) base \(base) reads \(readSet)")
                    #expect(window.conflicts(readSet: readSet, base: base) == (expected != .valid))
                }
                // Memory follows what the window still holds: at most one node per key written in it.
                let held = reference.history.filter { $0.rev > max(window.floor, start) }.flatMap(\.writes).map(\.path.count).reduce(0, +)
                #expect(window.nodeCount <= held)
            }
            // Once every write has left the window, nothing is held.
            for rev in (start + 151)...(start + 151 + min(capacity, 200)) { try window.record([], rev: rev) }
            if capacity <= 200 { #expect(window.nodeCount == 0) }
        }
    }

    @Test func validatesEachKindOfRead() throws {
        let window = VersionWindow(capacity: 100)
        let rooms = try Path("/rooms/r1")
        // rev 1: a message below the room, the room already existed (no reshape of /rooms/r1).
        try window.record([WrittenPath(path: try Path("/rooms/r1/messages/m1"), reshapedFrom: 3)], rev: 1)
        #expect(window.validate(ReadSet(shapes: [rooms]), base: 0) == .valid)
        #expect(window.validate(ReadSet(subtrees: [rooms]), base: 0) == .conflict)
        #expect(window.validate(ReadSet(shapes: [try Path("/rooms/r1/messages/m1/text")]), base: 0) == .conflict)
        #expect(window.validate(ReadSet(subtrees: [try Path("/rooms/r2")]), base: 0) == .valid)
        // rev 2: the room is deleted (its shape changes by a write at it; /rooms holds other rooms).
        try window.record([WrittenPath(path: rooms, reshapedFrom: 2)], rev: 2)
        #expect(window.validate(ReadSet(shapes: [rooms]), base: 1) == .conflict)
        #expect(window.validate(ReadSet(shapes: [try Path("/rooms")]), base: 1) == .valid)
        #expect(window.validate(ReadSet(shapes: [rooms]), base: 2) == .valid)
        // Virtual state is apart from the data root.
        try window.record([WrittenPath(.root)], rev: 3)
        #expect(window.validate(ReadSet(shapes: [VirtualPaths.rules]), base: 2) == .valid)
        try window.record([WrittenPath(VirtualPaths.rules)], rev: 4)
        #expect(window.validate(ReadSet(shapes: [VirtualPaths.rules]), base: 3) == .conflict)
        #expect(window.validate(ReadSet(shapes: [VirtualPaths.limitUsage(limit: "l", uid: "u")]), base: 3) == .valid)
    }

    @Test func refusesRevisionsOutOfOrderAndBasesOutsideTheWindow() throws {
        let window = VersionWindow(capacity: 2, head: 10)
        #expect(throws: VersionWindow.OutOfOrder.self) { try window.record([], rev: 12) }
        #expect(throws: VersionWindow.OutOfOrder.self) { try window.record([], rev: 10) }
        try window.record(writes: [try Path("/a")], rev: 11)
        #expect(window.head == 11)
        #expect(window.validate(ReadSet(), base: 8) == .outOfWindow)      // forgotten on every node
        #expect(window.validate(ReadSet(), base: 9) == .missingHistory)   // before this window's start
        #expect(window.validate(ReadSet(), base: 12) == .outOfWindow)     // after the head
        try window.record([], rev: 12)
        try window.record([], rev: 13)
        #expect(window.floor == 11)
        #expect(window.validate(ReadSet(shapes: [try Path("/a")]), base: 10) == .outOfWindow)
        #expect(window.validate(ReadSet(shapes: [try Path("/a")]), base: 11) == .valid)
        let full = VersionWindow(capacity: 5, head: UInt64.max - 1)
        try full.record([], rev: UInt64.max)
        #expect(throws: VersionWindow.OutOfOrder.self) { try full.record([], rev: UInt64.max) }
    }

    @Test func aWindowStartedLaterAnswersAsOneThatSawEverything() throws {
        var random = SeededRandom(seed: 99)
        let capacity: UInt64 = 20
        let history = (1...200).map { _ in (0..<Int.random(in: 0...2, using: &random)).map { _ in Self.randomWrite(&random) } }
        let whole = VersionWindow(capacity: capacity)
        for (index, writes) in history.enumerated() { try whole.record(writes, rev: UInt64(index + 1)) }
        // Started at 180 - capacity, fed the revisions after it from the log.
        let late = VersionWindow(capacity: capacity, head: 180 - capacity)
        for rev in (180 - capacity + 1)...200 { try late.record(history[Int(rev) - 1], rev: rev) }
        #expect(late.floor == whole.floor)
        for _ in 0..<500 {
            let readSet = Self.randomReadSet(&random)
            let base = UInt64.random(in: (whole.floor - 2)...200, using: &random)
            #expect(late.validate(readSet, base: base) == whole.validate(readSet, base: base))
        }
    }

    @Test func aWindowRebuiltFromAnothersHistoryAnswersAsIt() throws {
        var random = SeededRandom(seed: 7)
        let capacity: UInt64 = 30
        let original = VersionWindow(capacity: capacity)
        for rev in 1...150 as ClosedRange<UInt64> {
            try original.record((0..<Int.random(in: 0...2, using: &random)).map { _ in Self.randomWrite(&random) }, rev: rev)
        }
        let rebuilt = try VersionWindow(capacity: capacity, head: original.head, history: original.history)
        #expect(rebuilt.head == original.head && rebuilt.floor == original.floor)
        for rev in 151...200 as ClosedRange<UInt64> {
            for _ in 0..<20 {
                let readSet = Self.randomReadSet(&random)
                let base = UInt64.random(in: (original.floor - 2)...(original.head + 1), using: &random)
                #expect(rebuilt.validate(readSet, base: base) == original.validate(readSet, base: base))
            }
            let writes = (0..<Int.random(in: 0...2, using: &random)).map { _ in Self.randomWrite(&random) }
            try original.record(writes, rev: rev)
            try rebuilt.record(writes, rev: rev)
        }
        // A history that does not fit its head is refused.
        #expect(throws: VersionWindow.OutOfOrder.self) {
            try VersionWindow(capacity: capacity, head: 10, history: [(rev: 11, writes: [WrittenPath(try Path("/a"))])])
        }
    }
}

@Suite("Written paths")
struct WrittenPathTests {
    enum Kind: Equatable { case absent, leaf, branch }

    /// What a shape read sees at a location.
    struct Shape: Equatable {
        var kind: Kind
        var leaf: Leaf?
        var priority: Priority?
        init(_ node: Node) {
            kind = node.isNull ? .absent : (node.leafValue != nil ? .leaf : .branch)
            leaf = node.leafValue
            priority = node.priority
        }
    }

    @Test func nameExactlyTheAncestorsAWriteReshapesAndNothingElseChanges() {
        var generator = RandomRules(seed: 7)
        var random = SeededRandom(seed: 8)
        var reshaping = 0
        for _ in 0..<4000 {
            let tree = generator.tree(depth: 0)
            let path = Path(validated: (0..<Int.random(in: 0...4, using: &random)).map { _ in generator.keys.randomElement(using: &random)! })
            let value = ReadSetHarness.value(keys: generator.keys, depth: 0, using: &random)
            let written = WrittenPath(writing: value, at: path, over: tree)
            var after = tree
            after.set(value, at: path)
            for depth in 0..<path.count {
                let ancestor = Path(validated: Array(path.segments.prefix(depth)))
                let changed = Shape(tree.node(at: ancestor)) != Shape(after.node(at: ancestor))
                #expect(changed == (depth >= written.reshapedFrom), "\(value) at \(path) over \(tree): \(written)")
                if changed { reshaping += 1 }
            }
            var paths: [Path] = []
            ReadSetHarness.collectPaths(tree, at: .root, into: &paths)
            ReadSetHarness.collectPaths(after, at: .root, into: &paths)
            for other in paths where !path.contains(other) && !other.contains(path) {
                #expect(tree.node(at: other) == after.node(at: other), "\(value) at \(path) changed \(other)")
            }
        }
        #expect(reshaping > 1000)
    }

    @Test func priorityWritesCountAsWritesOfTheirNode() throws {
        let written = WrittenPath(writing: Node(.number(1)), at: try Path("/a/b/.priority"), over: .null)
        #expect(written == WrittenPath(path: try Path("/a/b"), reshapedFrom: 0))
        #expect(WrittenPath(path: try Path("/a"), reshapedFrom: 9).reshapedFrom == 1)
    }
}
