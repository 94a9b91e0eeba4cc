import PresenceTesting
import Testing
@testable import PresenceCore

/// `--max-queries-per-location`: one connection's distinct filtered queries at one location are
/// bounded, so a write there computes and pushes at most that many windows for it, however many
/// queries the connection tried to hold (issue 16's tagged-window attack: 5,000 distinct
/// `limitToLast` queries on one location, each write moving every window).
@Suite struct QueriesPerLocationTests {
    func status(_ message: String?) -> String? {
        guard let message, let range = message.range(of: #""s":""#) else { return nil }
        return String(message[range.upperBound...].prefix { $0 != "\"" })
    }

    func listen(_ harness: EngineHarness, _ id: ConnectionID, number: Int, path: String = "/items", limit: Int, tag: Int) -> String? {
        harness.request(number, "q", "{\"p\":\"\(path)\",\"q\":{\"i\":\"ts\",\"l\":\(limit),\"vf\":\"r\"},\"t\":\(tag),\"h\":\"\"}", from: id)
        return harness.take(id).last
    }

    /// A harness whose first connection holds 3 distinct queries at /items, the limit.
    func connectionAtTheLimit() -> (EngineHarness, ConnectionID) {
        let harness = EngineHarness(limits: EngineLimits(maxQueriesPerLocation: 3))
        let id = harness.connect()
        for limit in 1...3 { #expect(status(listen(harness, id, number: limit, limit: limit, tag: limit)) == "ok") }
        return (harness, id)
    }

    @Test func aQueryPastTheLimitIsRefusedWithTooBigNamingTheFlagAndLoggedOnce() {
        let (harness, id) = connectionAtTheLimit()
        let refused = listen(harness, id, number: 4, limit: 4, tag: 4)
        #expect(status(refused) == "too_big")
        #expect(refused?.contains("--max-queries-per-location") == true && refused?.contains("/items") == true)
        #expect(harness.engine.takeNotices().count == 1)
        #expect(status(listen(harness, id, number: 5, limit: 5, tag: 5)) == "too_big")
        #expect(harness.engine.takeNotices().isEmpty, "a second refusal is not logged again")
    }

    @Test func theSameQueryAgainIsNotCountedTwice() {
        let (harness, id) = connectionAtTheLimit()
        #expect(status(listen(harness, id, number: 4, limit: 2, tag: 2)) == "ok")
        #expect(status(listen(harness, id, number: 5, limit: 2, tag: 9)) == "ok", "the same query under a new tag replaces it")
        #expect(status(listen(harness, id, number: 6, limit: 4, tag: 4)) == "too_big")
    }

    @Test func unlisteningFreesAPlace() {
        let (harness, id) = connectionAtTheLimit()
        harness.request(4, "n", #"{"p":"/items","q":{"i":"ts","l":1,"vf":"r"},"t":1}"#, from: id)
        #expect(status(harness.take(id).last) == "ok")
        #expect(status(listen(harness, id, number: 5, limit: 5, tag: 5)) == "ok")
        #expect(status(listen(harness, id, number: 6, limit: 6, tag: 6)) == "too_big")
    }

    @Test func plainListensOtherLocationsAndOtherConnectionsAreNotCounted() {
        let (harness, id) = connectionAtTheLimit()
        harness.request(4, "q", #"{"p":"/items","h":""}"#, from: id)
        #expect(status(harness.take(id).last) == "ok", "the default listen is no query")
        #expect(status(listen(harness, id, number: 5, path: "/elsewhere", limit: 4, tag: 7)) == "ok")
        #expect(status(listen(harness, id, number: 6, path: "/items/k1", limit: 4, tag: 8)) == "ok", "a child is another location")
        let other = harness.connect()
        #expect(status(listen(harness, other, number: 1, limit: 4, tag: 4)) == "ok")
        #expect(status(listen(harness, id, number: 7, limit: 4, tag: 4)) == "too_big")
    }

    /// What one write costs (windows computed, messages sent) is bounded by the limit, not by how
    /// many queries the connection asked for; and what it holds is still exactly its windows.
    @Test(arguments: [150, 600])
    func aWriteMovingEveryWindowCostsAtMostTheLimit(tried: Int) throws {
        let harness = EngineHarness(limits: EngineLimits(maxQueriesPerLocation: 100))
        let attacker = harness.connect()
        let children = (0..<50).map { "\"k\($0)\":{\"ts\":\($0)}" }.joined(separator: ",")
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":{\(children)}}", from: attacker)
        var refused = 0
        for limit in 1...tried where status(listen(harness, attacker, number: 1 + limit, limit: limit, tag: limit)) == "too_big" {
            refused += 1
        }
        #expect(refused == tried - 100)
        func spec(_ limit: Int) -> QuerySpec {
            QuerySpec(index: .child(Path(validated: ["ts"])), limit: QueryLimit(count: limit, direction: .last))
        }
        var truth = harness.engine.value(at: try Path("/items"), namespace: "test")
        // The attacker holds the first 100 queries (tags 1...100): its views start as their windows.
        var views = Dictionary(uniqueKeysWithValues: (1...100).map { ($0, spec($0).apply(to: truth)) })
        for step in 0..<5 {
            let computed = harness.engine.counters.queryWindowChangesComputed + harness.engine.counters.queryResultsComputed
            harness.request(1_000 + step, "p", "{\"p\":\"/items/k\(step)\",\"d\":{\"ts\":\(100 + step)}}", from: attacker)
            truth.set(.branch(["ts": Node(.number(Double(100 + step)))], priority: nil), at: Path(validated: ["k\(step)"]))
            let sent = harness.take(attacker)
            #expect(harness.engine.counters.queryWindowChangesComputed + harness.engine.counters.queryResultsComputed - computed == 100)
            #expect(sent.filter { $0.contains(#""a":"m""#) }.count == 100, "one merge per held query")
            for text in sent {
                let data = try #require(try JSONParser.parse(text)["d"])
                guard data["a"] == .string("m"), case .number(let tag)? = data["b"]?["t"], case .object(let merged)? = data["b"]?["d"] else { continue }
                var view = try #require(views[Int(tag)])
                for (key, value) in merged { view.set(try Node(json: value), at: try Path(key)) }
                views[Int(tag)] = view
            }
            for (limit, view) in views { #expect(view == spec(limit).apply(to: truth), "limitToLast \(limit) after write \(step)") }
        }
    }
}
