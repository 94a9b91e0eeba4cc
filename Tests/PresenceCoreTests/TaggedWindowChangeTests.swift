import PresenceTesting
import Testing
@testable import PresenceCore

/// Many distinct tagged queries on one location get each write's change to their window (the
/// children that entered, left or changed) instead of the whole window, computed from one order
/// of the children (`ChildOrder`). What a client holds after applying the pushes must be exactly
/// the window computed from scratch.
@Suite struct TaggedWindowChangeTests {
    /// A child's value: mostly `{"score": small number}` (ties included), sometimes a string score,
    /// no score, a priority, or a bare leaf.
    static func childValue(_ random: inout SeededRandom) -> String {
        switch random.int(10) {
        case 0: return "\"s\(random.int(5))\""
        case 1: return "\(random.int(8))"
        case 2: return #"{"other":1}"#
        case 3: return "{\"score\":\(random.int(8)),\".priority\":\(random.int(4))}"
        case 4: return "{\"score\":\"s\(random.int(5))\"}"
        default: return "{\"score\":\(random.int(8))}"
        }
    }

    static func bound(_ random: inout SeededRandom, index: QueryIndex) -> QueryBound {
        let inclusive = !random.chance(0.25)
        if index == .key { return QueryBound(value: .string("k\(random.int(30))"), inclusive: inclusive) }
        let value: QueryValue = random.chance(0.2) ? .string("s\(random.int(5))") : .number(Double(random.int(8)))
        let name: String? = random.chance(0.3) ? "k\(random.int(30))" : nil
        return QueryBound(value: value, name: name, inclusive: inclusive)
    }

    static func spec(_ random: inout SeededRandom) -> QuerySpec {
        let indexes: [QueryIndex] = [.child(Path(validated: ["score"])), .child(Path(validated: ["score"])), .value, .key, .priority]
        var spec = QuerySpec(index: indexes[random.int(indexes.count)])
        if random.chance(0.4) { spec.start = bound(&random, index: spec.index) }
        if random.chance(0.4) { spec.end = bound(&random, index: spec.index) }
        if random.chance(0.8) || !spec.isFiltered {
            spec.limit = QueryLimit(count: 1 + random.int(6), direction: random.chance(0.5) ? .first : .last)
        }
        return spec
    }

    /// What a client holds for its tagged query: `d` replaces it, `m` sets (or with null removes)
    /// each child it names.
    static func apply(_ text: String, tag: Int, to view: inout Node) throws {
        let message = try JSONParser.parse(text)
        guard let data = message["d"], data["r"] == nil, let body = data["b"], body["t"] == .number(Double(tag)) else { return }
        #expect(body["p"] == .string("items"))
        switch data["a"] {
        case .string("d")?: view = try Node(json: body["d"] ?? .null)
        case .string("m")?:
            guard case .object(let changes)? = body["d"] else { Issue.record("a merge without children: \(text)"); return }
            for (key, value) in changes { view.set(try Node(json: value), at: try Path(key)) }
        default: Issue.record("unexpected push \(text)")
        }
    }

    @Test(arguments: [1, 2, 3, 4])
    func everyClientHoldsItsWindowAfterEachRandomWrite(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let harness = EngineHarness()
        let writer = harness.connect()
        var truth = Node.null
        let items = Path(validated: ["items"])
        for index in 0..<12 {
            let value = Self.childValue(&random)
            harness.request(index, "p", "{\"p\":\"/items/k\(index)\",\"d\":\(value)}", from: writer)
            truth.set(try Node(json: try JSONParser.parse(value)), at: items.child("k\(index)"))
        }
        // 40 distinct queries, each held by two connections with their own tags and a third
        // sharing the first's tag.
        var clients: [(id: ConnectionID, spec: QuerySpec, tag: Int, view: Node)] = []
        for query in 0..<40 {
            let spec = Self.spec(&random)
            for (copy, tag) in [(0, query + 1), (1, query + 1001), (2, query + 1)] {
                let id = harness.connect()
                harness.request(1, "q", "{\"p\":\"/items\",\"q\":\(JSONWriter.string(spec.wireObject)),\"t\":\(tag),\"h\":\"\"}", from: id)
                var view = Node.null
                for text in harness.take(id) { try Self.apply(text, tag: tag, to: &view) }
                #expect(view == spec.apply(to: truth.node(at: items)), "initial data of \(spec), copy \(copy)")
                clients.append((id, spec, tag, view))
            }
        }
        let changesBefore = harness.engine.counters.queryWindowChangesComputed
        _ = harness.take(writer)
        for step in 0..<250 {
            let key = "k\(random.int(30))"
            let request: String
            switch random.int(20) {
            case 0..<12:
                let value = random.chance(0.15) ? "null" : Self.childValue(&random)
                request = "{\"r\":\(step + 100),\"a\":\"p\",\"b\":{\"p\":\"/items/\(key)\",\"d\":\(value)}}"
                truth.set(try Node(json: try JSONParser.parse(value)), at: items.child(key))
            case 12..<16:
                let score = random.int(8)
                request = "{\"r\":\(step + 100),\"a\":\"p\",\"b\":{\"p\":\"/items/\(key)/score\",\"d\":\(score)}}"
                truth.set(Node(.number(Double(score))), at: items.child(key).child("score"))
            case 16..<19:
                let other = "k\((Int(key.dropFirst())! + 1 + random.int(29)) % 30)", a = Self.childValue(&random), b = Self.childValue(&random)
                request = "{\"r\":\(step + 100),\"a\":\"m\",\"b\":{\"p\":\"/items\",\"d\":{\"\(key)\":\(a),\"\(other)\":\(b)}}}"
                truth.set(try Node(json: try JSONParser.parse(a)), at: items.child(key))
                truth.set(try Node(json: try JSONParser.parse(b)), at: items.child(other))
            default:
                let a = Self.childValue(&random)
                request = "{\"r\":\(step + 100),\"a\":\"p\",\"b\":{\"p\":\"/items\",\"d\":{\"\(key)\":\(a)}}}"
                truth.set(try Node(json: try JSONParser.parse("{\"\(key)\":\(a)}")), at: items)
            }
            harness.send("{\"t\":\"d\",\"d\":\(request)}", from: writer)
            #expect(harness.take(writer).last?.contains("\"s\":\"ok\"") == true, "\(request)")
            let expected = truth.node(at: items)
            for index in clients.indices {
                for text in harness.take(clients[index].id) { try Self.apply(text, tag: clients[index].tag, to: &clients[index].view) }
                #expect(clients[index].view == clients[index].spec.apply(to: expected),
                        "seed \(seed) step \(step) \(request): \(clients[index].spec)")
            }
        }
        // The changes were worked out from the order, not only recomputed whole.
        #expect(harness.engine.counters.queryWindowChangesComputed > changesBefore)
    }

    @Test func distinctQueriesCostOneWindowChangeEachAndIdenticalOnesNoMore() throws {
        let harness = EngineHarness()
        let writer = harness.connect()
        harness.request(1, "p", #"{"p":"/board","d":{"a":{"score":1},"b":{"score":2},"c":{"score":3},"d":{"score":4}}}"#, from: writer)
        // 20 distinct limitToLast queries, each held by 10 connections under 2 tags.
        var watchers: [ConnectionID] = []
        for limit in 1...20 {
            for copy in 0..<10 {
                let id = harness.connect()
                harness.request(1, "q", "{\"p\":\"/board\",\"q\":{\"i\":\"score\",\"l\":\(limit),\"vf\":\"r\"},\"t\":\(limit * 10 + copy % 2),\"h\":\"\"}", from: id)
                watchers.append(id)
            }
        }
        for id in watchers + [writer] { _ = harness.take(id) }
        let changes = harness.engine.counters.queryWindowChangesComputed
        let wholes = harness.engine.counters.queryResultsComputed
        // A new highest score: in every window; the lowest leaves the 1..3 windows.
        harness.engine.handle(NumberedRequest(number: 2, request: .put(path: try Path("/board/e/score"), data: 9, hash: nil)),
                              from: writer, now: harness.clock.now)
        let effects = harness.engine.drainEffects()
        #expect(harness.engine.counters.queryWindowChangesComputed == changes + 20)
        #expect(harness.engine.counters.queryResultsComputed == wholes)
        let merges = effects.compactMap { effect -> (Int?, [Outbound.Change], [ConnectionID])? in
            guard case .send(let recipients, .merge(_, let changes, let tag)) = effect else { return nil }
            return (tag, changes, recipients)
        }
        // One merge per tag (40), each recipient once.
        #expect(merges.count == 40)
        #expect(merges.flatMap(\.2).count == watchers.count)
        let e = Outbound.Change(path: Path(validated: ["e"]), value: .branch(["score": Node(.number(9))], priority: nil))
        for (tag, changes, _) in merges {
            let limit = tag! / 10
            switch limit {
            case 1: #expect(changes == [Outbound.Change(path: Path(validated: ["d"]), value: .null), e])
            case 2: #expect(changes == [Outbound.Change(path: Path(validated: ["c"]), value: .null), e])
            case 3: #expect(changes == [Outbound.Change(path: Path(validated: ["b"]), value: .null), e])
            case 4: #expect(changes == [Outbound.Change(path: Path(validated: ["a"]), value: .null), e])
            default: #expect(changes == [e])
            }
        }
    }
}
