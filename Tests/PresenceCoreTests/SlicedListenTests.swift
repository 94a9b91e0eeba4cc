import PresenceTesting
import PresenceWire
import Testing
@testable import PresenceCore

/// A big listen's initial data in slices (issue 16): the engine registers the listener at once and
/// hands the shell a `listenData` (data, then the ok); a write meanwhile is pushed to it; over the
/// budget the listen is refused and dropped.
@Suite struct SlicedListenTests {
    static func listen(_ harness: EngineHarness, _ number: Int, _ body: String, from id: ConnectionID) throws -> [Effect] {
        guard case .request(let request) = try RequestDecoder.decode(Array("{\"t\":\"d\",\"d\":{\"r\":\(number),\"a\":\"q\",\"b\":\(body)}}".utf8)) else {
            Issue.record("not decoded")
            return []
        }
        harness.engine.handle(request, from: id, now: 0)
        return harness.engine.drainEffects()
    }

    @Test func aBigListenIsRegisteredAtOnceAndItsDataDeferred() throws {
        let harness = EngineHarness(limits: EngineLimits(sliceReadsOver: 4_096))
        let id = harness.connect(), writer = harness.connect()
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":\(SlicedReadTests.items(1_000).jsonString(exportFormat: true))}", from: id)
        _ = harness.take(id)
        let effects = try Self.listen(harness, 2, #"{"p":"/items","q":{"i":"score","l":2,"vf":"r"},"t":5,"h":""}"#, from: id)
        guard effects.count == 1, case .send([id], .listenData(2, let read, 5)) = effects[0] else {
            Issue.record("a big listen was answered at once: \(effects)")
            return
        }
        #expect(try SlicedReadTests.json(read.resolved()) == QueryWindow.result(of: read.spec, at: SlicedReadTests.items(1_000)).json(exportFormat: true))
        // Registered already: a write now is pushed to it (the shell sends it after the data).
        harness.request(1, "p", #"{"p":"/items/k999/score","d":500}"#, from: writer)
        #expect(harness.take(id).contains { $0.contains("\"a\":\"d\"") && $0.contains("\"t\":5") })
        // Without a loop, the data and then the ok.
        let texts = OutboundEncoder.messages(for: effects[0].sentMessage!)
        #expect(texts.count == 2 && texts[0].hasPrefix(#"{"t":"d","d":{"a":"d","b":{"p":"items","d":{"#) && texts[0].hasSuffix(#","t":5}}}"#))
        #expect(texts.last == #"{"t":"d","d":{"r":2,"b":{"s":"ok","d":{}}}}"#)
    }

    @Test func aListenFoundOverTheBudgetIsDropped() throws {
        let harness = EngineHarness(limits: EngineLimits(maxReadBytes: 10_000, sliceReadsOver: 4_096))
        let id = harness.connect()
        harness.request(1, "p", "{\"p\":\"/items\",\"d\":\(SlicedReadTests.items(1_000).jsonString(exportFormat: true))}", from: id)
        _ = harness.take(id)
        guard case .send(_, .listenData(2, let read, nil)) = try Self.listen(harness, 2, #"{"p":"/items","h":""}"#, from: id).first,
              case .failure(.tooBig(let message)) = read.resolved() else {
            Issue.record("not deferred, or not over the budget")
            return
        }
        #expect(harness.engine.refusedDeferredListen(id, read: read, tag: nil, message: message) == .tooBig(message))
        harness.request(3, "p", #"{"p":"/items/k1/score","d":5}"#, from: id)
        #expect(!harness.take(id).contains { $0.contains("\"a\":\"d\"") }, "the refused listen is still pushed to")
    }
}

private extension Effect {
    var sentMessage: Outbound? {
        if case .send(_, let message) = self { return message }
        return nil
    }
}
