import PresenceTesting
import Testing
@testable import PresenceCore

/// A write computes each distinct filtered query once, however many connections listen to it,
/// pushes it once per tag, and skips a query whose range the write provably does not touch.
@Suite struct TaggedQueryCostTests {
    let query = #"{"l":2,"vf":"r","i":"score"}"#

    func board(_ harness: EngineHarness, _ writer: ConnectionID) {
        harness.request(1, "p", #"{"p":"/board","d":{"a":{"score":1},"b":{"score":2},"c":{"score":3}}}"#, from: writer)
        _ = harness.take(writer)
    }

    @Test func identicalQueriesAreComputedOncePerWriteAndEachTagGetsItsPush() throws {
        let harness = EngineHarness()
        let writer = harness.connect()
        board(harness, writer)
        var watchers: [ConnectionID] = []
        for index in 0..<300 {
            let id = harness.connect()
            harness.request(1, "q", "{\"p\":\"/board\",\"q\":\(query),\"t\":\(1 + index % 3),\"h\":\"\"}", from: id)
            _ = harness.take(id)
            watchers.append(id)
        }
        let before = harness.engine.counters.queryResultsComputed
        harness.engine.handle(NumberedRequest(number: 2, request: .put(path: try Path("/board/d/score"), data: 9, hash: nil)),
                              from: writer, now: harness.clock.now)
        let effects = harness.engine.drainEffects()
        #expect(harness.engine.counters.queryResultsComputed == before + 1)
        // One message per tag (3), plus the writer's ack.
        let pushes = effects.compactMap { effect -> (Int?, [ConnectionID])? in
            guard case .send(let recipients, .data(_, _, let tag)) = effect else { return nil }
            return (tag, recipients)
        }
        #expect(pushes.count == 3)
        #expect(Set(pushes.flatMap(\.1)) == Set(watchers))
        for (tag, recipients) in pushes {
            #expect(recipients.allSatisfy { watchers.firstIndex(of: $0)! % 3 + 1 == tag })
        }
        // Each watcher sees the window with its own tag.
        let harnessWatcher = watchers[4]
        harness.request(3, "p", #"{"p":"/board/a/score","d":10}"#, from: writer)
        #expect(harness.take(harnessWatcher) == [#"{"t":"d","d":{"a":"d","b":{"p":"board","d":{"a":{"score":10},"d":{"score":9}},"t":2}}}"#])
    }

    @Test func aWriteOutsideTheRangeComputesNothing() throws {
        let harness = EngineHarness()
        let writer = harness.connect()
        board(harness, writer)
        let watcher = harness.connect()
        harness.request(1, "q", #"{"p":"/board","q":{"sp":2,"ep":3,"i":"score"},"t":5,"h":""}"#, from: watcher)
        _ = harness.take(watcher)
        let before = harness.engine.counters.queryResultsComputed
        // A child out of the range before and after: nothing to recompute, nothing to push.
        harness.request(2, "p", #"{"p":"/board/z","d":{"score":50}}"#, from: writer)
        harness.request(3, "p", #"{"p":"/board/z/score","d":60}"#, from: writer)
        harness.request(4, "p", #"{"p":"/board/a","d":null}"#, from: writer)
        #expect(harness.engine.counters.queryResultsComputed == before)
        #expect(harness.take(watcher).isEmpty)
        // Into the range: pushed; out again: pushed (the child leaves the window).
        harness.request(5, "p", #"{"p":"/board/z/score","d":2.5}"#, from: writer)
        harness.request(6, "p", #"{"p":"/board/z/score","d":70}"#, from: writer)
        #expect(harness.take(watcher) == [
            #"{"t":"d","d":{"a":"d","b":{"p":"board","d":{"b":{"score":2},"c":{"score":3},"z":{"score":2.5}},"t":5}}}"#,
            #"{"t":"d","d":{"a":"d","b":{"p":"board","d":{"b":{"score":2},"c":{"score":3}},"t":5}}}"#,
        ])
        #expect(harness.engine.counters.queryResultsComputed == before + 2)
        // A write above the location always recomputes.
        harness.request(7, "p", #"{"p":"/","d":{"board":{"q":{"score":3}}}}"#, from: writer)
        #expect(harness.take(watcher) == [#"{"t":"d","d":{"a":"d","b":{"p":"board","d":{"q":{"score":3}},"t":5}}}"#])
    }
}

/// A write to `x/.priority` is applied, journalled and pushed as the priority alone, not as a
/// rewrite of x's subtree: a few bytes must not cost O(size of x).
@Suite struct PriorityWriteTests {
    @Test func aPriorityWriteCostsThePriorityNotTheSubtree() throws {
        let harness = EngineHarness()
        harness.engine.enableJournal()
        let id = harness.connect()
        var members: [String] = []
        for index in 0..<500 { members.append("\"k\(index)\":\(index)") }
        harness.request(1, "p", "{\"p\":\"/big\",\"d\":{\(members.joined(separator: ","))}}", from: id)
        _ = harness.engine.takeJournal()
        harness.request(2, "q", #"{"p":"/big","h":""}"#, from: id)
        _ = harness.take(id)
        harness.request(3, "p", #"{"p":"/big/.priority","d":5}"#, from: id)
        #expect(harness.take(id) == [
            #"{"t":"d","d":{"a":"d","b":{"p":"big/.priority","d":5}}}"#,
            #"{"t":"d","d":{"r":3,"b":{"s":"ok","d":""}}}"#,
        ])
        let journal = try #require(harness.engine.takeJournal())
        #expect(journal.mutations == [.write(namespace: "test", path: try Path("/big/.priority"), value: Node(.number(5)))])
        #expect(harness.engine.value(at: try Path("/big"), namespace: "test").priority == .number(5))
        #expect(harness.engine.value(at: try Path("/big"), namespace: "test").children.count == 500)
        // On a missing node it changes nothing; null removes the priority.
        harness.request(4, "p", #"{"p":"/none/.priority","d":5}"#, from: id)
        harness.request(5, "p", #"{"p":"/big/.priority","d":null}"#, from: id)
        #expect(harness.engine.value(at: try Path("/none"), namespace: "test") == .null)
        #expect(harness.engine.value(at: try Path("/big"), namespace: "test").priority == nil)
        // The rules still see the node with its new priority.
        let rules = try RuleSet.load(text: #"{"rules": {".read": true, "p": {".write": true, ".validate": "newData.getPriority() === 7"}}}"#, source: "t")
        let ruled = EngineHarness(policy: rules)
        let writer = ruled.connect()
        ruled.request(1, "p", #"{"p":"/p","d":{"a":1,".priority":7}}"#, from: writer)
        ruled.request(2, "p", #"{"p":"/p/.priority","d":8}"#, from: writer)
        ruled.request(3, "p", #"{"p":"/p/.priority","d":7}"#, from: writer)
        let replies = ruled.take(writer).filter { $0.contains(#""r":"#) }
        #expect(replies.map { $0.contains(#""s":"ok""#) } == [true, false, true])
    }
}
