import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Big reads at a location a limits file guards (issue 16): a `g` or a REST `GET` over
/// `sliceReadsOver` is deferred like any other, carrying whose use to count; the use is counted
/// only once the shell has the text within the budget (`useDeferredReadLimit`), so a read that
/// never finishes (refused as too big, its client gone) uses nothing.
@Suite struct SlicedLimitedReadTests {
    static let limits = try! LimitSet.load(text: """
        {"limits": {"readItems": {"location": "items", "tiers": [
          {"name": "free", "when": "auth != null", "limit": 2, "cooldownSeconds": 120}
        ]}}}
        """, source: "limits.json")

    func harness() -> (EngineHarness, ConnectionID) {
        let harness = EngineHarness(limits: EngineLimits(sliceReadsOver: 4_096))
        harness.engine.setLimits(Self.limits)
        let id = harness.connect()  // namespace "test"
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":\(SlicedReadTests.items(1_000).jsonString(exportFormat: true))}", from: id)
        harness.signIn(id, as: "alice")
        _ = harness.take(id)
        return (harness, id)
    }

    func deferredGet(_ harness: EngineHarness, _ id: ConnectionID, number: Int) throws -> DeferredRead? {
        guard case .request(let request) = try RequestDecoder.decode(
            Array("{\"t\":\"d\",\"d\":{\"r\":\(number),\"a\":\"g\",\"b\":{\"p\":\"/items\",\"q\":{}}}}".utf8)) else { return nil }
        harness.engine.handle(request, from: id, now: harness.clock.now)
        guard case .send(_, .reply(_, .success(.deferred(let read)))) = harness.engine.drainEffects().first else { return nil }
        return read
    }

    func remaining(_ harness: EngineHarness, _ id: ConnectionID) throws -> JSON? {
        harness.request(9, "g", #"{"p":"/feature-limits/readItems","q":{}}"#, from: id)
        return try JSONParser.parse(harness.take(id).last ?? "")["d"]?["b"]?["d"]?["remaining"]
    }

    @Test func aGuardedGetIsDeferredAndItsUseCountedOnlyWhenItsTextIsMade() throws {
        let (harness, id) = harness()
        let now = harness.clock.now
        guard let unfinished = try deferredGet(harness, id, number: 2) else {
            Issue.record("a big g at a guarded location was answered at once")
            return
        }
        #expect(unfinished.limitUse != nil)
        #expect(try remaining(harness, id) == 2, "a read whose text is not made yet uses nothing")
        for number in [3, 4] {
            let read = try #require(try deferredGet(harness, id, number: number))
            #expect(harness.engine.useDeferredReadLimit(read, now: now) == nil)
        }
        #expect(try remaining(harness, id) == 0)
        let third = try #require(try deferredGet(harness, id, number: 5))
        guard case .rateLimited(let message, _) = harness.engine.useDeferredReadLimit(third, now: now) else {
            Issue.record("the third use was not refused")
            return
        }
        #expect(message.contains("limit of 2 uses reached"))
    }

    @Test func aGuardedRESTGetCountsAtTheEndAndAStreamsFirstEventIsAnsweredAtOnce() throws {
        let (harness, _) = harness()
        let alice = Credentials.user(auth: ["uid": "alice", "token": ["sub": "alice"]], expiresAt: nil)
        let items = Path(validated: ["items"])
        guard case .now(.slicedRead(let read)) = harness.engine.submitRead(items, namespace: "test", credentials: alice,
                                                                            now: harness.clock.now, countsAsUse: true, sliced: .plain) else {
            Issue.record("a big REST GET at a guarded location was answered at once")
            return
        }
        #expect(read.limitUse?.credentials == alice)
        // A stream's use is counted when it opens (its first event is not a reply the shell
        // could refuse afterwards): at a guarded location it is answered at once, as before slices.
        let stream = ConnectionID(900)
        if case .failure(let error) = harness.engine.openStream(stream, path: items, namespace: "test", credentials: alice, query: .default,
                                                                now: harness.clock.now) {
            Issue.record("the stream was refused: \(error)")
        }
        guard case .send(_, .data) = harness.engine.drainEffects().last else {
            Issue.record("a stream's first event at a guarded location was deferred")
            return
        }
    }
}
