import PresenceTesting
import PresenceWire
import Testing
@testable import PresenceCore

/// Big reads answered in slices (issue 16): with `sliceReadsOver` the engine answers a big `g` with
/// a `DeferredRead` (rules checked at once), and `SlicedRead` computes it in bounded steps, with
/// the same answer as a read at once, refusing it when its text passes the budget.
@Suite struct SlicedReadTests {
    static func items(_ count: Int) -> Node {
        var children: [String: Node] = [:]
        for index in 0..<count {
            children["k\(index)"] = .branch(["score": Node(.number(Double(index % 97))), "name": Node(.string("user \(index)"))],
                                            priority: index % 5 == 0 ? .number(Double(index)) : nil)
        }
        return .branch(children, priority: nil)
    }

    static func read(_ value: Node, spec: QuerySpec = .default, budget: Int = 1 << 30) -> DeferredRead {
        DeferredRead(path: Path(validated: ["items"]), value: value, spec: spec, filtered: true, budget: budget, refusal: "over")
    }

    /// Runs a read to the end in steps of `work`; the outcome and how many steps it took.
    static func run(_ read: DeferredRead, work: Int) -> (Result<[UInt8], EngineError>, steps: Int, maxWork: Int) {
        var sliced = SlicedRead(read)
        var steps = 0, maxWork = 0
        while true {
            let before = sliced.workDone
            let outcome = sliced.step(work: work)
            steps += 1
            maxWork = max(maxWork, sliced.workDone - before)
            if let outcome { return (outcome, steps, maxWork) }
        }
    }

    static func json(_ outcome: Result<[UInt8], EngineError>) throws -> JSON {
        guard case .success(let bytes) = outcome else { throw EngineError.invalidData("refused") }
        return try JSONParser.parse(String(decoding: bytes, as: UTF8.self))
    }

    @Test func aBigAnswerComesInBoundedStepsAndEqualsTheAnswerAtOnce() throws {
        let value = Self.items(5_000)
        let (outcome, steps, maxWork) = Self.run(Self.read(value), work: 500)
        // 5,000 children (each a small branch of leaves, written in one unit): many steps, none
        // doing more than asked.
        #expect(steps >= 10)
        #expect(maxWork <= 500)
        #expect(try Self.json(outcome) == value.json(exportFormat: true))
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func queriesInStepsGiveTheSameResultAsAtOnce(_ seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let value = Self.items(1_500 + random.int(1_000))
        let indexes: [QueryIndex] = [.key, .value, .priority, .child(Path(validated: ["score"]))]
        for _ in 0..<12 {
            var spec = QuerySpec(index: indexes[random.int(indexes.count)])
            if random.int(3) > 0 { spec.limit = QueryLimit(count: random.int(3_000), direction: random.int(2) == 0 ? .first : .last) }
            if random.int(2) == 0, spec.index == .child(Path(validated: ["score"])) {
                spec.start = QueryBound(value: .number(Double(random.int(50))), inclusive: true)
            }
            let (outcome, steps, _) = Self.run(Self.read(value, spec: spec), work: 256)
            #expect(steps > 1)
            #expect(try Self.json(outcome) == spec.apply(to: value).json(exportFormat: true), "\(spec)")
        }
    }

    @Test func anAnswerOverTheBudgetIsRefusedWithoutWritingItAll() {
        let value = Self.items(20_000)
        var sliced = SlicedRead(Self.read(value, budget: 10_000))
        var outcome: Result<[UInt8], EngineError>?
        while outcome == nil { outcome = sliced.step(work: 100) }
        #expect(outcome == .failure(.tooBig("over")))
        // It stopped soon after the budget: about 10 KB of 20,000 children's text.
        #expect(sliced.workDone < 2_000)
    }

    @Test func theEngineDefersOnlyBigReads() throws {
        let harness = EngineHarness(limits: EngineLimits(sliceReadsOver: 4_096))
        let id = harness.connect()
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":\(Self.items(1_000).jsonString(exportFormat: true))}", from: id)
        harness.request(2, "p", #"{"p":"/small","d":"x"}"#, from: id)
        _ = harness.take(id)
        for (number, path) in [(3, "/items"), (4, "/small")] {
            guard case .request(let request) = try RequestDecoder.decode(Array("{\"t\":\"d\",\"d\":{\"r\":\(number),\"a\":\"g\",\"b\":{\"p\":\"\(path)\",\"q\":{}}}}".utf8)) else {
                Issue.record("not decoded")
                return
            }
            harness.engine.handle(request, from: id, now: 0)
        }
        let effects = harness.engine.drainEffects()
        guard case .send(_, .reply(3, .success(.deferred(let read)))) = effects.first else {
            Issue.record("a big g was answered at once: \(effects.first.map { "\($0)" } ?? "nothing")")
            return
        }
        #expect(try Self.json(read.resolved()) == Self.items(1_000).json(exportFormat: true))
        guard case .send(_, .reply(4, .success(.node(Node(.string("x")))))) = effects.last else {
            Issue.record("a small g was deferred")
            return
        }
        // Without a loop to slice on, the encoder answers it whole, as a read at once would be.
        let whole = try JSONParser.parse(OutboundEncoder.encode(.reply(number: 3, result: .success(.deferred(read)))))
        #expect(whole == (try JSONParser.parse(OutboundEncoder.encode(.reply(number: 3, result: .success(.node(read.value)))))))
    }

    /// Groups of items: branches deeper than the root, written a node per unit.
    static func groups(_ count: Int, of size: Int) -> Node {
        var children: [String: Node] = [:]
        for index in 0..<count { children["g\(index)"] = items(size) }
        children["leaf"] = .leaf(.string("top"), priority: .number(3))
        return .branch(children, priority: .string("root"))
    }

    static func read(_ value: Node, spec: QuerySpec = .default, form: DeferredRead.Form) -> DeferredRead {
        DeferredRead(path: Path(validated: ["items"]), value: value, spec: spec, filtered: true, budget: 1 << 30, refusal: "over", form: form)
    }

    @Test func restFormsInStepsEqualTheirAnswersAtOnce() throws {
        for value in [Self.items(3_000), Self.groups(40, of: 30), Self.groups(3, of: 2_000)] {
            let plain = Self.run(Self.read(value, form: .plain), work: 100).0
            #expect(try Self.json(plain) == value.json(exportFormat: false))
            let shallow = Self.run(Self.read(value, form: .shallow), work: 100).0
            #expect(try Self.json(shallow) == Shallow.shallow(value))
            let spec = QuerySpec(index: .key, limit: QueryLimit(count: 7, direction: .last))
            let window = Self.run(Self.read(value, spec: spec, form: .shallow), work: 100).0
            #expect(try Self.json(window) == Shallow.shallow(spec.apply(to: value)))
        }
    }

    @Test func prettyTextMadeInPiecesEqualsThePrettyWriter() {
        let values = [Self.items(40), Self.groups(3, of: 20), Node(.string("a \"quoted\" {[,:]} \\ text")), .branch([:], priority: nil)]
        for value in values {
            let compact = Array(value.jsonString(exportFormat: true).utf8)
            let expected = JSONWriter.pretty(value.json(exportFormat: true))
            for pieceSize in [1, 2, 7, 64, compact.count + 1] {
                var stream = PrettyJSONStream()
                var out: [UInt8] = []
                var start = 0
                while start < compact.count {
                    let end = min(compact.count, start + pieceSize)
                    stream.append(compact[start..<end], to: &out)
                    start = end
                }
                stream.finish(into: &out)
                #expect(String(decoding: out, as: UTF8.self) == expected, "pieces of \(pieceSize)")
            }
        }
        var empty = PrettyJSONStream(), out: [UInt8] = []
        empty.append(Array(#"{"a":{},"b":[]}"#.utf8), to: &out)
        #expect(String(decoding: out, as: UTF8.self) == JSONWriter.pretty(.object([("a", .object([])), ("b", .array([]))])))
    }

    @Test func restGetsOverTheThresholdAreAnsweredInSlicesAsTheyWereAtOnce() throws {
        let sliced = EngineHarness(limits: EngineLimits(sliceReadsOver: 4_096))
        let whole = EngineHarness()
        for harness in [sliced, whole] {
            let id = harness.connect()
            // Wide enough for its shallow answer (keys only) to pass the threshold too.
            harness.request(1, "p", "{\"p\":\"/items\",\"d\":\(Self.items(1_000).jsonString(exportFormat: true))}", from: id)
            _ = harness.take(id)
        }
        let queries: [[String: String]] = [[:], ["shallow": "true"], ["format": "export"], ["print": "pretty"],
                                           ["orderBy": "\"$key\"", "limitToLast": "2"]]
        for query in queries {
            let request = HTTPRequest(method: "GET", path: "/items.json", query: query, headers: ["authorization": "Bearer owner"])
            guard case .sliced = RESTHandler(engine: sliced.engine, defaultNamespace: "test").respond(request, now: 0) else {
                Issue.record("not sliced: \(query)")
                continue
            }
            let a = RESTHandler(engine: sliced.engine, defaultNamespace: "test").handle(request, now: 0)
            let b = RESTHandler(engine: whole.engine, defaultNamespace: "test").handle(request, now: 0)
            #expect(a.status == 200 && a.status == b.status, "\(query)")
            #expect(try JSONParser.parse(a.body) == JSONParser.parse(b.body), "\(query)")
            if query["print"] == "pretty" { #expect(a.body == b.body) }
        }
        // An ETag is a hash of the whole value: answered at once.
        let tagged = HTTPRequest(method: "GET", path: "/items.json", headers: ["authorization": "Bearer owner", "x-firebase-etag": "true"])
        guard case .response = RESTHandler(engine: sliced.engine, defaultNamespace: "test").respond(tagged, now: 0) else {
            Issue.record("an ETag read was sliced")
            return
        }
    }
}
