import Testing
import PresenceCore
import PresenceTesting

/// One rules decision to check: rules, stored tree, who, and what.
struct DecisionCase: CustomStringConvertible {
    enum Operation {
        case read(Path, RuleQuery?)
        /// Resolved writes (fixed: a log entry carries them as resolved by the proposer).
        case write([(Path, Node)])
    }

    var name: String
    var rules: RuleSet
    var root: Node
    var auth: JSON?
    var now: Int64
    var operation: Operation

    var description: String { name }

    func decide(on tree: Node) -> RuleDecision {
        switch operation {
        case let .read(path, query): return rules.canRead(path, root: tree, auth: auth, now: now, query: query)
        case .write(let writes): return rules.canWrite(writes, root: tree, auth: auth, now: now)
        }
    }

    func record(on tree: Node) -> (RuleDecision, ReadSet) {
        var readSet = ReadSet()
        let decision: RuleDecision
        switch operation {
        case let .read(path, query):
            decision = rules.canRead(path, root: tree, auth: auth, now: now, query: query, recording: &readSet)
        case .write(let writes):
            decision = rules.canWrite(writes, root: tree, auth: auth, now: now, recording: &readSet)
        }
        return (decision, readSet)
    }

    /// Keys worth mutating: the tree's, the read set's, the writes' and a few others.
    func keys(_ readSet: ReadSet) -> [String] {
        var keys: Set<String> = ["a", "b", "c", "x", "alice", "bob"]
        func collect(_ node: Node, depth: Int) {
            guard depth < 6 else { return }
            for (key, child) in node.children {
                keys.insert(key)
                collect(child, depth: depth + 1)
            }
        }
        collect(root, depth: 0)
        for path in readSet.subtrees + readSet.shapes + writtenPaths { keys.formUnion(path.segments.filter(Path.isValidKey)) }
        return keys.sorted()
    }

    var writtenPaths: [Path] {
        if case .write(let writes) = operation { return writes.map(\.0) }
        if case .read(let path, _) = operation { return [path] }
        return []
    }
}

/// What a batch of mutation checks saw.
struct SoundnessTally {
    /// Mutations outside the read set (the decision must not change).
    var outside = 0
    /// Mutations that conflict with the read set, and how many of them changed the decision.
    var conflicting = 0
    var flipped = 0
    /// Cases with a non-empty read set, and those where some conflicting mutation changed the decision.
    var casesReading = 0
    var casesFlipped = 0

    mutating func add(_ other: SoundnessTally) {
        outside += other.outside
        conflicting += other.conflicting
        flipped += other.flipped
        casesReading += other.casesReading
        casesFlipped += other.casesFlipped
    }
}

/// The soundness check: a decision recorded with its read set must come out the same (with the
/// same read set) on every tree reached by writes that do not conflict with that read set.
enum ReadSetHarness {
    @discardableResult
    static func check(_ decisionCase: DecisionCase, seeds: Range<UInt64> = 0..<60,
                      sourceLocation: SourceLocation = #_sourceLocation) -> SoundnessTally {
        let (decision, readSet) = decisionCase.record(on: decisionCase.root)
        let plain = decisionCase.decide(on: decisionCase.root)
        #expect(decision == plain, "\(decisionCase): recording changed the decision", sourceLocation: sourceLocation)
        let keys = decisionCase.keys(readSet)
        var tally = SoundnessTally()
        var flippedHere = false
        for seed in seeds {
            var random = SeededRandom(seed: seed &* 0x9E37_79B9 &+ 17)
            var tree = decisionCase.root
            var applied: [WrittenPath] = []
            var conflict = false
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let (path, value) = mutation(tree: tree, readSet: readSet, extraPaths: decisionCase.writtenPaths,
                                             keys: keys, using: &random)
                let written = WrittenPath(writing: value, at: path, over: tree)
                tree.set(value, at: path)
                applied.append(written)
                if readSet.conflicts(with: written) {
                    conflict = true
                    break
                }
            }
            let after = decisionCase.record(on: tree)
            if conflict {
                tally.conflicting += 1
                if after.0.allowed != decision.allowed {
                    tally.flipped += 1
                    flippedHere = true
                }
                continue
            }
            tally.outside += 1
            #expect(after.0 == decision, "\(decisionCase): writes \(applied) outside \(readSet) changed \(decision) to \(after.0)",
                    sourceLocation: sourceLocation)
            #expect(after.1 == readSet, "\(decisionCase): writes \(applied) outside the read set changed it from \(readSet) to \(after.1)",
                    sourceLocation: sourceLocation)
        }
        if !readSet.isEmpty { tally.casesReading = 1 }
        if flippedHere { tally.casesFlipped = 1 }
        return tally
    }

    /// A random write near what matters: the read set, the operation's paths, the stored tree.
    static func mutation(tree: Node, readSet: ReadSet, extraPaths: [Path], keys: [String],
                         using random: inout SeededRandom) -> (Path, Node) {
        var anchors = readSet.subtrees + readSet.shapes + extraPaths
        anchors.removeAll { $0.segments.contains { !Path.isValidKey($0) } }
        var existing: [Path] = []
        collectPaths(tree, at: .root, into: &existing)
        var path: Path
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<4 where !anchors.isEmpty: path = anchors.randomElement(using: &random)!
        case 4..<7 where !existing.isEmpty: path = existing.randomElement(using: &random)!
        default: path = .root
        }
        // Then move around it: up, down, or to a sibling.
        switch Int.random(in: 0..<6, using: &random) {
        case 0: path = path.parent ?? path
        case 1, 2: path = path.child(keys.randomElement(using: &random)!)
        case 3: if let parent = path.parent { path = parent.child(keys.randomElement(using: &random)!) }
        default: break
        }
        if path.count > 5 { path = Path(validated: Array(path.segments.prefix(5))) }
        if Int.random(in: 0..<25, using: &random) == 0 {
            return (path.child(".priority"), Bool.random(using: &random) ? Node(.number(3)) : .null)
        }
        return (path, value(keys: keys, depth: 0, using: &random))
    }

    static func value(keys: [String], depth: Int, using random: inout SeededRandom) -> Node {
        let leaves: [Leaf] = [.number(0), .number(1), .number(2.5), .string("a"), .string("alice"), .bool(true), .bool(false)]
        var node: Node
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3 where depth == 0: return .null
        case 0..<6: node = Node(leaves.randomElement(using: &random)!)
        default:
            var children: [String: Node] = [:]
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let child = depth < 2 ? value(keys: keys, depth: depth + 1, using: &random) : Node(leaves.randomElement(using: &random)!)
                children[keys.randomElement(using: &random)!] = child
            }
            node = Node.branch(children.filter { !$0.value.isNull }, priority: nil)
            if node.isNull { node = Node(.number(7)) }
        }
        if Int.random(in: 0..<8, using: &random) == 0 { node = node.withPriority(.number(1)) }
        return node
    }

    static func collectPaths(_ node: Node, at path: Path, into paths: inout [Path]) {
        guard paths.count < 300 else { return }
        if !path.isRoot { paths.append(path) }
        for key in node.children.keys.sorted() { collectPaths(node.child(key), at: path.child(key), into: &paths) }
    }
}
