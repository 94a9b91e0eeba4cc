@testable import PresenceServer
import Testing

/// What operators are told about Redis (`RedisReachability`): one line per outage, reminders ever
/// rarer, never a line per attempt, and a start without Redis said as such.
@Suite struct RedisReachabilityTests {
    @Test func aStartWithoutRedisIsSaidOnceThenRemindedEverRarerThenBack() {
        var status = RedisReachability(address: "127.0.0.1:6390")
        #expect(status.unreachableReason(at: 0) == "not connected to Redis at 127.0.0.1:6390 yet")
        let first = status.failed("Connection refused", retryInMilliseconds: 100, at: 1_000)
        #expect(first?.hasPrefix("cannot reach Redis at 127.0.0.1:6390 (Connection refused): the node runs without it") == true)
        var lines: [(Int64, String)] = []
        // An attempt every 2 s for 20 minutes, a beat every second.
        for second in Int64(2)...1_200 {
            let now = second * 1000
            if second % 2 == 0 { #expect(status.failed("Connection refused", retryInMilliseconds: 2000, at: now) == nil) }
            if let line = status.reminder(at: now) { lines.append((second, line)) }
        }
        #expect(lines.map(\.0) == [31, 91, 211, 451, 931])
        #expect(lines.first?.1 == "Redis 127.0.0.1:6390 still unreachable after 30 s (16 failed attempts; last: Connection refused); retrying")
        #expect(status.unreachableReason(at: 1_201_000) == "Redis at 127.0.0.1:6390 unreachable for 1200 s (Connection refused)")
        let back = status.connected(at: 1_201_000)
        #expect(back == "Redis 127.0.0.1:6390 reachable after 1200 s and 601 failed attempts: catching up, then ready")
        #expect(status.reminder(at: 2_000_000) == nil && !status.isDown)
    }

    @Test func anOutageOfARunningNodeIsSaidOnceAndItsEndOnce() {
        var status = RedisReachability(address: "127.0.0.1:6390")
        #expect(status.connected(at: 0) == nil)
        #expect(status.failed("Connection reset by peer", retryInMilliseconds: 120, at: 5_000)
            == "Redis 127.0.0.1:6390 unreachable (Connection reset by peer); retrying in 120 ms")
        #expect(status.failed("Connection refused", retryInMilliseconds: 300, at: 5_200) == nil)
        #expect(status.connected(at: 9_000) == "Redis 127.0.0.1:6390 reachable again after 4 s and 2 failed attempts")
        #expect(status.connected(at: 9_500) == nil)
        _ = status.failed("Connection refused", retryInMilliseconds: 100, at: 10_000)
        #expect(status.connected(at: 10_100) == "Redis 127.0.0.1:6390 reachable again after 0 s and 1 failed attempt")
    }
}
