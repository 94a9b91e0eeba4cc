import Testing
@testable import PresenceRedis

/// The connection's timing decisions read the injected clock, not the wall: with the clock held
/// still nothing expires and no attempt is repeated, however long the loop runs. No Redis needed
/// (the endpoint is a closed port).
@Suite(.serialized) struct ClientClockTests {
    final class HandClock: RedisClock {
        var now: Int64 = 1_000_000
        func milliseconds() -> Int64 { now }
    }

    @Test func deadlinesAndRetriesFollowTheInjectedClock() throws {
        let loop = TestLoop()
        let clock = HandClock()
        let endpoint = try RedisEndpoint(host: "127.0.0.1", port: RedisServer.freePort())
        let redis = RedisConnection(loop: loop.loop, endpoint: endpoint,
                                    options: .init(commandTimeoutMilliseconds: 1000), clock: clock, random: { 0.5 })
        var failures: [Int64] = []
        redis.onEvent = { if case .failed(_, let retry) = $0 { failures.append(retry) } }
        redis.start()
        var result: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING")) { result = $0 }
        #expect(loop.run(until: { !failures.isEmpty }, timeout: 1000))
        loop.run(for: 300)
        #expect(failures == [75], "one attempt while the clock stands still; the wait is half-jittered (0.5 of 50..100)")
        #expect(result == nil, "the command's deadline has not come on this clock")
        clock.now += 75
        #expect(loop.run(until: { failures.count == 2 }, timeout: 1000))
        #expect(failures == [75, 150])
        clock.now += 1000
        #expect(loop.run(until: { result != nil }, timeout: 1000))
        guard case .failure(.notSent(let reason))? = result else { Issue.record("\(String(describing: result))"); return }
        #expect(reason.contains("refused"))
        redis.close()
        #expect(loop.destroy() == 0)
    }
}
