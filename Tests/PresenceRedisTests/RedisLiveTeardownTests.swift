import Testing
@testable import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

/// Closing connections at every awkward moment: every pending command gets exactly one answer,
/// nothing is used after it is freed, and the loop ends with no handle left open.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveTeardownTests {
    /// Counts completions per command: each must run exactly once.
    final class Completions {
        var results: [Int: [Result<RedisReply, RedisError>]] = [:]
        func record(_ index: Int) -> (Result<RedisReply, RedisError>) -> Void {
            { self.results[index, default: []].append($0) }
        }
        var answeredOnce: Bool { results.values.allSatisfy { $0.count == 1 } }
    }

    func ready(_ loop: TestLoop, _ server: RedisServer) throws -> RedisConnection {
        let redis = RedisConnection(loop: loop.loop, endpoint: server.endpoint)
        redis.start()
        guard loop.run(until: { redis.state == .ready }) else { throw LoopTimedOut(what: "connected") }
        return redis
    }

    @Test func closingBeforeConnectingFailsQueuedCommandsAsNotSent() throws {
        let loop = TestLoop()
        let redis = RedisConnection(loop: loop.loop, endpoint: try RedisEndpoint(host: "127.0.0.1", port: RedisServer.freePort()))
        let completions = Completions()
        redis.start()
        for i in 0..<100 { redis.send(RedisCommand("PING"), completion: completions.record(i)) }
        redis.close()
        #expect(completions.results.count == 100 && completions.answeredOnce)
        #expect(completions.results.values.allSatisfy { $0[0] == .failure(.notSent("the connection was closed")) })
        var after: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING")) { after = $0 }
        #expect(after == .failure(.notSent("the connection is closed")))
        #expect(loop.destroy() == 0)
    }

    @Test func closingWithCommandsInFlightFailsThemAsLost() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let redis = try ready(loop, server)
        let completions = Completions()
        redis.send(RedisCommand("BLPOP", "nothing", 5), timeoutMilliseconds: 10_000, completion: completions.record(0))
        for i in 1..<50 { redis.send(RedisCommand("PING"), completion: completions.record(i)) }
        loop.run(for: 50) // written, waiting behind the BLPOP
        redis.close()
        #expect(completions.results.count == 50 && completions.answeredOnce)
        #expect(completions.results.values.allSatisfy { $0[0] == .failure(.connectionLost("the connection was closed")) })
        #expect(loop.destroy() == 0)
    }

    @Test func closingInsideAReplyAnswersTheRestAfterIt() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let redis = try ready(loop, server)
        let completions = Completions()
        var sentAfterClose: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING")) { result in
            completions.record(0)(result)
            redis.close() // from hiredis's reply callback: hiredis frees the context after we return
            redis.send(RedisCommand("PING")) { sentAfterClose = $0 }
        }
        redis.send(RedisCommand("BLPOP", "nothing", 5), timeoutMilliseconds: 10_000, completion: completions.record(1))
        #expect(loop.run(until: { completions.results.count == 2 }))
        #expect(completions.results[0]?.first == .success(.status("PONG")))
        #expect(completions.results[1]?.first == .failure(.connectionLost("the connection was closed")))
        #expect(sentAfterClose == .failure(.notSent("the connection is closed")))
        loop.run(for: 50)
        #expect(completions.answeredOnce)
        #expect(loop.destroy() == 0)
    }

    @Test func closingFromTheLostEventWhileRedisDies() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let redis = RedisConnection(loop: loop.loop, endpoint: server.endpoint)
        var events: [RedisConnection.Event] = []
        redis.onEvent = { event in
            events.append(event)
            if case .lost = event { redis.close() } // inside hiredis's free of the dying context
        }
        redis.start()
        #expect(loop.run(until: { redis.state == .ready }))
        let completions = Completions()
        for i in 0..<20 { redis.send(RedisCommand("BLPOP", "q\(i)", 5), timeoutMilliseconds: 10_000, completion: completions.record(i)) }
        loop.run(for: 50)
        server.signal(SIGKILL)
        #expect(loop.run(until: { completions.results.count == 20 }))
        #expect(completions.answeredOnce)
        #expect(completions.results.values.allSatisfy { $0[0].isOutcomeUnknownFailure })
        #expect(redis.state == .closed && events.count == 2, "\(events)")
        #expect(loop.destroy() == 0)
    }

    @Test func closingWhileTheHandshakeHangs() throws {
        let server = try RedisServer()
        defer { server.signal(SIGCONT) }
        server.signal(SIGSTOP) // TCP connects (kernel backlog); PING is never answered
        let loop = TestLoop()
        let redis = RedisConnection(loop: loop.loop, endpoint: server.endpoint)
        redis.start()
        #expect(loop.run(until: { redis.state == .connecting }))
        loop.run(for: 100)
        var queued: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING")) { queued = $0 }
        redis.close()
        #expect(queued == .failure(.notSent("the connection was closed")))
        #expect(loop.destroy() == 0)
    }

    @Test func manyConnectionsComeAndGoWithoutLeaks() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        for round in 0..<30 {
            let redis = RedisConnection(loop: loop.loop, endpoint: server.endpoint)
            redis.start()
            var done = 0
            for _ in 0..<(round % 5) { redis.send(RedisCommand("PING")) { _ in done += 1 } }
            // Close at different moments: before connecting, connecting, ready, replies pending.
            loop.run(until: { false }, timeout: Int64(round % 4) * 3)
            redis.close()
            #expect(done == round % 5, "round \(round)")
        }
        #expect(loop.destroy() == 0)
    }
}

extension Result where Success == RedisReply, Failure == RedisError {
    var isOutcomeUnknownFailure: Bool {
        if case .failure(let error) = self { return error.outcomeUnknown }
        return false
    }
}
