import Testing
@testable import PresenceRedis

/// `NodeAsks` on a real Redis: an ask reaches every other node's reader (not the asker's own, and
/// not one posted before the reader started), answers come back in order from a given index, and
/// answer lists expire.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveNodeAsksTests {
    @Test func asksReachTheOtherNodesAndTheirAnswersComeBack() throws {
        let fixture = try ClusterFixture()
        func node(_ id: String) -> (NodeAsks, RedisConnection) {
            let reader = RedisConnection(loop: fixture.loop.loop, endpoint: fixture.server.endpoint,
                                         options: .init(commandTimeoutMilliseconds: 1000))
            reader.start()
            return (NodeAsks(connection: fixture.redis, reader: reader, nodeID: id, blockMilliseconds: 200), reader)
        }
        let (a, aReader) = node("a#1")
        let (b, bReader) = node("b#1")
        // Posted before anyone reads: not for the readers that start later.
        _ = try fixture.loop.call { a.ask(kind: "old", body: [], completion: $0) }
        var seenByA: [NodeAsks.Ask] = []
        var seenByB: [NodeAsks.Ask] = []
        a.onAsk = { seenByA.append($0) }
        b.onAsk = { seenByB.append($0) }
        a.start()
        b.start()
        #expect(fixture.loop.run(until: { a.lastAskID != nil && b.lastAskID != nil }))
        let id = try fixture.loop.call { a.ask(kind: "connections", body: Array("{\"limit\":5}".utf8), completion: $0) }
        #expect(fixture.loop.run(until: { !seenByB.isEmpty }))
        fixture.loop.run(for: 300)
        #expect(seenByB.map(\.id) == [id] && seenByB[0].kind == "connections" && seenByB[0].from == "a#1")
        #expect(seenByB[0].body == Array("{\"limit\":5}".utf8) && (seenByB[0].postedAt ?? 0) > 0)
        #expect(seenByA.isEmpty, "a node does not answer its own asks through Redis")
        // Two answers; read from the start, then from the second.
        try fixture.loop.call { b.answer(id, body: Array("one".utf8), completion: $0) }
        try fixture.loop.call { a.answer(id, body: Array("two".utf8), completion: $0) }
        #expect(try fixture.loop.call { a.answers(to: id, skip: 0, completion: $0) } == [Array("one".utf8), Array("two".utf8)])
        #expect(try fixture.loop.call { a.answers(to: id, skip: 1, completion: $0) } == [Array("two".utf8)])
        let ttl = try fixture.command("PTTL", a.answerKey(id)).integer ?? -1
        #expect(ttl > 0 && ttl <= NodeAsks.answerTTLMilliseconds)
        #expect(try fixture.loop.call { a.answers(to: "0-1", skip: 0, completion: $0) }.isEmpty)
        a.stop()
        b.stop()
        aReader.close()
        bReader.close()
        fixture.finish()
    }
}
