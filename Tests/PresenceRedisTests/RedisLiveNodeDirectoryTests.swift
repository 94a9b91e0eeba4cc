import Testing
@testable import PresenceRedis

/// The operators' node list and kicks (NODES, NODES_LEAVE, the kicks stream) on a real Redis.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveNodeDirectoryTests {
    @Test func beatsListEveryNodeAndCarryKicksToTheOthers() throws {
        let fixture = try ClusterFixture()
        let a = NodeDirectory(connection: fixture.redis, nodeID: "a#1")
        let b = NodeDirectory(connection: fixture.redis, nodeID: "b#1")
        let first = try fixture.loop.call { a.beat(info: Array("{\"x\":1}".utf8), forgetAfterMilliseconds: 60_000,
                                                   keepKicksMilliseconds: 60_000, completion: $0) }
        #expect(first.nodes.map(\.id) == ["a#1"] && first.nodes[0].info == Array("{\"x\":1}".utf8))
        #expect(first.nodes[0].lastBeat == first.redisTime)
        // A kick sent before b's first beat still reaches b (the last minute of kicks).
        _ = try fixture.loop.call { a.kick(session: "early", reason: "r", completion: $0) }
        let bFirst = try fixture.loop.call { b.beat(info: [], forgetAfterMilliseconds: 60_000, keepKicksMilliseconds: 60_000, completion: $0) }
        #expect(bFirst.kicks.map(\.session) == ["early"])
        #expect(Set(bFirst.nodes.map(\.id)) == ["a#1", "b#1"])
        _ = try fixture.loop.call { a.kick(session: "S1", reason: "spam", completion: $0) }
        let bSecond = try fixture.loop.call { b.beat(info: [], forgetAfterMilliseconds: 60_000, keepKicksMilliseconds: 60_000, completion: $0) }
        #expect(bSecond.kicks.map(\.session) == ["S1"] && bSecond.kicks[0].reason == "spam" && bSecond.kicks[0].from == "a#1")
        let bThird = try fixture.loop.call { b.beat(info: [], forgetAfterMilliseconds: 60_000, keepKicksMilliseconds: 60_000, completion: $0) }
        #expect(bThird.kicks.isEmpty, "each kick is seen once")
        // A node that stops beating is forgotten after the period; a leave is at once.
        fixture.loop.run(for: 300)
        let late = try fixture.loop.call { b.beat(info: [], forgetAfterMilliseconds: 200, keepKicksMilliseconds: 60_000, completion: $0) }
        #expect(late.nodes.map(\.id) == ["b#1"])
        try fixture.loop.call { b.leave(completion: $0) }
        #expect(try fixture.command("ZCARD", b.beatsKey) == .integer(0))
        #expect(try fixture.command("HLEN", b.infoKey) == .integer(0))
        fixture.finish()
    }
}
