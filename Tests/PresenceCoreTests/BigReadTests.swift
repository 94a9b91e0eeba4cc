import PresenceTesting
import Testing
@testable import PresenceCore

/// A read whose answer would pass the read budget is refused with `too_big` saying how to read the
/// data in parts (and uses nothing), before anything is serialized; a limited query on a big
/// location is answered by selection, with the same result as sorting everything.
@Suite struct BigReadTests {
    func harness(budget: Int) -> (EngineHarness, ConnectionID) {
        let harness = EngineHarness(limits: EngineLimits(maxReadBytes: budget))
        let id = harness.connect()
        var members: [String] = []
        for index in 0..<2_000 { members.append("\"k\(index)\":{\"score\":\(index % 977),\"name\":\"user \(index)\"}") }
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":{\(members.joined(separator: ","))}}", from: id)
        _ = harness.take(id)
        return (harness, id)
    }

    @Test func aReadOverTheBudgetIsRefusedWithWhatToDo() throws {
        let (harness, id) = harness(budget: 30_000)
        harness.request(2, "g", #"{"p":"/items","q":{}}"#, from: id)
        let refused = try #require(harness.take(id).last)
        #expect(refused.contains(#""s":"too_big""#))
        #expect(refused.contains("--max-read-bytes") && refused.contains("limitToLast") && refused.contains("shallow=true"))
        // A listen's initial data too: refused, and no listener is left behind.
        harness.request(3, "q", #"{"p":"/items","h":""}"#, from: id)
        #expect(harness.take(id).last?.contains(#""s":"too_big""#) == true)
        #expect(harness.engine.connectionSnapshots().first?.listeners == 0)
        // Below the location, or a limited query on it, fits.
        harness.request(4, "g", #"{"p":"/items/k5","q":{}}"#, from: id)
        #expect(harness.take(id).last == #"{"t":"d","d":{"r":4,"b":{"s":"ok","d":{"name":"user 5","score":5}}}}"#)
        harness.request(5, "q", #"{"p":"/items","q":{"l":2,"vf":"r","i":"score"},"t":1,"h":""}"#, from: id)
        let window = harness.take(id)
        #expect(window.first?.contains(#""t":1"#) == true && window.last?.contains(#""s":"ok""#) == true)
        #expect(window.first?.contains("\"k976\"") == true && window.first?.contains("\"k1953\"") == true)
        // REST: the same refusal, except for shallow=true, which fits.
        let admin = Credentials.admin
        let path = try Path("/items")
        guard case .failure(.tooBig) = harness.engine.read(path, namespace: "test", credentials: admin, now: 0) else {
            Issue.record("a REST read over the budget was not refused")
            return
        }
        guard case .success(let node) = harness.engine.read(path, namespace: "test", credentials: admin, now: 0, shallow: true) else {
            Issue.record("a shallow REST read was refused")
            return
        }
        #expect(node.children.count == 2_000)
        #expect(harness.engine.takeNotices().count == 1, "logged once per connection")
    }

    @Test func theBudgetWalkStopsAtTheBudget() {
        var tree = Node.null
        for index in 0..<1_000 { tree.set(Node(.string("0123456789")), at: Path(validated: ["k\(index)"])) }
        let exact = tree.estimatedJSONBytes(within: .max)
        #expect(exact != nil)
        #expect(abs((exact ?? 0) - tree.jsonString().utf8.count) < 2_000, "an estimate of the JSON length")
        #expect(tree.estimatedJSONBytes(within: 100) == nil)
        #expect(tree.estimatedShallowJSONBytes(within: 100_000) != nil)
    }

    /// Sorting many keys (precomputed integers, ASCII compared as bytes) gives the pairwise order.
    @Test func manyKeysSortAsThePairwiseOrderSays() {
        var random = SeededRandom(seed: 42)
        let pieces = ["a", "B", "z", "0", "1", "-", "é", "e\u{301}", "日本", "😀", "\u{FFFD}", "~", " "]
        for _ in 0..<20 {
            var keys: Set<String> = ["-0", "00", "0", "10", "2", "-2147483648", "2147483648", "007"]
            while keys.count < 200 {
                keys.insert((0..<(1 + random.int(4))).map { _ in pieces[random.int(pieces.count)] }.joined())
            }
            let expected = Array(keys).sorted(by: KeyOrder.less)
            let sorted = KeyOrder.sortedKeys(keys)
            // Keys the order calls equal (e.g. "-0" and "00") may come in either order.
            #expect(zip(sorted, expected).allSatisfy { !KeyOrder.less($0, $1) && !KeyOrder.less($1, $0) })
            let entries = Dictionary(uniqueKeysWithValues: keys.map { ($0, $0.count) })
            #expect(KeyOrder.sorted(entries).map(\.key) == sorted || zip(KeyOrder.sorted(entries).map(\.key), expected)
                .allSatisfy { !KeyOrder.less($0, $1) && !KeyOrder.less($1, $0) })
        }
    }

    /// The byte writer gives exactly what `JSONWriter` writes for the node's JSON.
    @Test func nodesSerializeAsTheirJSON() {
        var random = SeededRandom(seed: 9)
        let strings = ["", "a", "é\"\\\n\u{1}\u{1F}\u{7F}", "😀", "\u{0}x", "k", "日本"]
        func leaf() -> Leaf {
            switch random.int(6) {
            case 0: return .bool(random.int(2) == 0)
            case 1: return .number(Double(random.int(2_000_000)) - 1_000_000)
            case 2: return .number([0.1, -0.0, 1e300, -2.5e-8, 9_007_199_254_740_993, 12_345.678][random.int(6)])
            default: return .string(strings[random.int(strings.count)])
            }
        }
        func node(_ depth: Int) -> Node {
            let priority: Priority? = random.int(3) == 0 ? (random.int(2) == 0 ? .number(Double(random.int(9))) : .string("p")) : nil
            if depth == 0 || random.int(3) == 0 { return .leaf(leaf(), priority: priority) }
            var children: [String: Node] = [:]
            for _ in 0..<(1 + random.int(depth == 1 ? 30 : 4)) {
                children[random.int(3) == 0 ? String(random.int(50)) : strings[random.int(strings.count)] + "\(random.int(40))"] = node(depth - 1)
            }
            return .branch(children, priority: priority)
        }
        for _ in 0..<200 {
            let value = node(3)
            for export in [false, true] {
                #expect(value.jsonString(exportFormat: export) == JSONWriter.string(value.json(exportFormat: export)))
            }
        }
    }

    /// `QueryWindow` (selection) against `QuerySpec.apply` (sort everything) on random data.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func selectionGivesTheSameResultAsSorting(_ seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var children: [String: Node] = [:]
        for index in 0..<(50 + random.int(200)) {
            let key = random.int(4) == 0 ? String(random.int(40)) : "k\(random.int(300))"
            let value: Node
            switch random.int(5) {
            case 0: value = Node(.number(Double(random.int(20))))
            case 1: value = Node(.string("s\(random.int(20))"))
            case 2: value = .leaf(.bool(random.int(2) == 0), priority: .number(Double(random.int(5))))
            case 3: value = .branch(["score": Node(.number(Double(random.int(10))))], priority: random.int(2) == 0 ? .string("p\(index % 4)") : nil)
            default: value = .branch(["name": Node(.string("n\(random.int(9))"))], priority: nil)
            }
            children[key] = value
        }
        let node = Node.branch(children, priority: nil)
        let indexes: [QueryIndex] = [.key, .value, .priority, .child(Path(validated: ["score"]))]
        for _ in 0..<60 {
            let index = indexes[random.int(indexes.count)]
            var spec = QuerySpec(index: index)
            if random.int(2) == 0 {
                spec.limit = QueryLimit(count: random.int(12), direction: random.int(2) == 0 ? .first : .last)
            }
            if random.int(3) == 0 {
                let value: QueryValue = index == .key ? .string("k\(random.int(300))") : .number(Double(random.int(10)))
                spec.start = QueryBound(value: value, name: random.int(2) == 0 ? "k\(random.int(300))" : nil, inclusive: random.int(2) == 0)
            }
            if random.int(3) == 0 {
                let value: QueryValue = index == .key ? .string("k\(random.int(300))") : .number(Double(random.int(20)))
                spec.end = QueryBound(value: value, inclusive: random.int(2) == 0)
            }
            #expect(QueryWindow.result(of: spec, at: node) == spec.apply(to: node), "\(spec)")
        }
        #expect(QueryWindow.result(of: QuerySpec(limit: .first(3)), at: Node(.number(1))) == .null)
    }
}
