import PresenceCore
import Testing
@testable import PresenceRedis

/// The client's timing and parsing rules, without a Redis.
@Suite struct ClientLogicTests {
    @Test func backoffDoublesToItsCeilingWithHalfJitter() {
        var backoff = Backoff(policy: .redis(initialMilliseconds: 100, maxMilliseconds: 2000))
        var ceilings: [Int64] = []
        for attempt in 0..<8 {
            let ceiling = backoff.ceilingMilliseconds
            ceilings.append(ceiling)
            let unit = Double(attempt % 4) / 4
            let delay = backoff.nextDelay(unit: unit)
            #expect(delay >= ceiling / 2 && delay < ceiling, "attempt \(attempt): \(delay) outside [\(ceiling / 2), \(ceiling))")
        }
        #expect(ceilings == [100, 200, 400, 800, 1600, 2000, 2000, 2000])
        backoff.reset()
        #expect(backoff.ceilingMilliseconds == 100)
    }

    @Test func backoffNeverWaitsNearZeroWhateverTheRandomSource() {
        for unit in [0, -1, 0.999_999, 1, .nan, .infinity] as [Double] {
            var backoff = Backoff(policy: .redis(initialMilliseconds: 1, maxMilliseconds: 1))
            #expect(backoff.nextDelay(unit: unit) >= 1)
            var normal = Backoff(policy: .redis())
            let delay = normal.nextDelay(unit: unit)
            #expect(delay >= 50 && delay <= 100)
        }
    }

    @Test func commandQueueExpiresInOrderAndKeepsTheRest() {
        var queue = CommandQueue()
        for (id, deadline) in [(1, 50), (2, 10), (3, 70), (4, 10), (5, 90)] as [(UInt64, Int64)] {
            queue.append(PendingCommand(id: id, command: RedisCommand("PING"), deadline: deadline, patience: 0, completion: { _ in }))
        }
        #expect(queue.earliestDeadline == 10)
        #expect(queue.removeExpired(now: 50).map(\.id) == [1, 2, 4])
        #expect(queue.count == 2)
        #expect(queue.earliestDeadline == 70)
        #expect(queue.pop(id: 5)?.id == 5) // not the front: found anyway
        #expect(queue.popFirst()?.id == 3)
        #expect(queue.isEmpty && queue.earliestDeadline == nil && queue.popFirst() == nil)
    }

    /// In flight, a command past its deadline is answered (timed out) but stays to match its
    /// reply; only a command past its patience makes the socket count as dead.
    @Test func commandsInFlightTimeOutAloneUntilRedisIsOutOfPatience() {
        var inflight = CommandQueue()
        func command(_ id: UInt64, deadline: Int64, stuckAt: Int64) -> PendingCommand {
            var c = PendingCommand(id: id, command: RedisCommand("PING"), deadline: deadline, patience: 0, completion: { _ in })
            c.stuckAt = stuckAt
            return c
        }
        inflight.append(command(1, deadline: 100, stuckAt: 2000)) // waited for a connection, little time left
        inflight.append(command(2, deadline: 2050, stuckAt: 2050))
        #expect(inflight.nextInFlightEvent == 100)
        #expect(inflight.answerExpired(now: 100).map(\.id) == [1])
        #expect(inflight.answerExpired(now: 150).isEmpty, "answered once")
        #expect(!inflight.isStuck(now: 1999) && inflight.isStuck(now: 2000))
        #expect(inflight.nextInFlightEvent == 2000)
        #expect(inflight.pop(id: 1)?.answered == true)
        #expect(inflight.pop(id: 2)?.answered == false)
    }

    @Test func commandQueueStaysFIFOAcrossCompaction() {
        var queue = CommandQueue()
        var next: UInt64 = 0
        var expected: UInt64 = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) {
                next += 1
                queue.append(PendingCommand(id: next, command: RedisCommand("PING"), deadline: 0, patience: 0, completion: { _ in }))
            }
            for _ in 0..<(round % 5 + 1) {
                guard let popped = queue.popFirst() else { break }
                expected += 1
                #expect(popped.id == expected)
            }
        }
        #expect(queue.count == Int(next - expected))
        #expect(queue.removeAll().map(\.id) == Array((expected + 1)...next))
    }

    @Test func endpointsAreNumericOnly() throws {
        #expect(try RedisEndpoint(parsing: "127.0.0.1:6390") == RedisEndpoint(host: "127.0.0.1", port: 6390))
        #expect(try RedisEndpoint(parsing: "[::1]:6379").host == "::1")
        #expect(try RedisEndpoint(parsing: "[::1]:6379").description == "[::1]:6379")
        #expect(throws: RedisEndpoint.ParseError.notNumeric("localhost")) { try RedisEndpoint(parsing: "localhost:6379") }
        #expect(throws: RedisEndpoint.ParseError.badPort("0")) { try RedisEndpoint(parsing: "127.0.0.1:0") }
        #expect(throws: RedisEndpoint.ParseError.badPort("x")) { try RedisEndpoint(parsing: "127.0.0.1:x") }
        #expect(throws: RedisEndpoint.ParseError.malformed("::1:6379")) { try RedisEndpoint(parsing: "::1:6379") }
        #expect(throws: RedisEndpoint.ParseError.malformed("6379")) { try RedisEndpoint(parsing: "6379") }
    }

    @Test func scriptHashesAreTheOnesRedisUses() {
        #expect(RedisScript(name: "x", source: "return 1").sha1 == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    }
}
