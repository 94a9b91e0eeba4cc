import CHiredis
import Testing
@testable import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

/// `RedisConnection` against a real redis-server: commands, pipelining, the failures the design
/// must survive (Redis down at connect, killed, stopped) and clean teardown.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveConnectionTests {
    final class Recorder {
        var events: [RedisConnection.Event] = []
        var connects: Int { events.filter { $0 == .connected }.count }
        var failures: [String] {
            events.compactMap { if case .failed(let reason, _) = $0 { reason } else { nil } }
        }
        var losses: [String] {
            events.compactMap { if case .lost(let reason, _) = $0 { reason } else { nil } }
        }
    }

    func connect(_ loop: TestLoop, _ endpoint: RedisEndpoint, options: RedisConnection.Options = .init(),
                 waitReady: Bool = true) throws -> (RedisConnection, Recorder) {
        let connection = RedisConnection(loop: loop.loop, endpoint: endpoint, options: options)
        let recorder = Recorder()
        connection.onEvent = { recorder.events.append($0) }
        connection.start()
        if waitReady {
            guard loop.run(until: { connection.state == .ready }) else { throw LoopTimedOut(what: "connected") }
        }
        return (connection, recorder)
    }

    @Test func commandsAreBinarySafeAndRepliesTyped() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (redis, _) = try connect(loop, server.endpoint)
        let value: [UInt8] = [0, 13, 10, 255, 36, 42, 0]
        #expect(try loop.call { redis.send(RedisCommand("SET", "k\0\r\n", value), completion: $0) } == .status("OK"))
        #expect(try loop.call { redis.send(RedisCommand("GET", "k\0\r\n"), completion: $0) } == .bulk(value))
        #expect(try loop.call { redis.send(RedisCommand("GET", "missing"), completion: $0) } == .null)
        let large = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) } // several reads and writes
        #expect(try loop.call { redis.send(RedisCommand("SET", "large", large), completion: $0) } == .status("OK"))
        #expect(try loop.call { redis.send(RedisCommand("GET", "large"), completion: $0) } == .bulk(large))
        #expect(try loop.call { redis.send(RedisCommand("INCRBY", "n", Int64(-5)), completion: $0) } == .integer(-5))
        #expect(try loop.call { redis.send(RedisCommand("RPUSH", "l", "a", "", "c"), completion: $0) } == .integer(3))
        #expect(try loop.call { redis.send(RedisCommand("LRANGE", "l", 0, -1), completion: $0) }
            == .array([.bulk(Array("a".utf8)), .bulk([]), .bulk(Array("c".utf8))]))
        let wrongType = try loop.call { redis.send(RedisCommand("INCR", "l"), completion: $0) }
        #expect(wrongType.errorMessage?.hasPrefix("WRONGTYPE") == true)
        let unsupported = try loop.wait { redis.send(RedisCommand("SUBSCRIBE", "c"), completion: $0) }
        #expect(unsupported == .failure(.notSent("SUBSCRIBE is not supported (replies would not match commands)")))
        redis.close()
        #expect(loop.destroy() == 0, "every libuv handle closed")
    }

    @Test func pipelinedRepliesComeBackInOrder() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (redis, _) = try connect(loop, server.endpoint)
        var replies: [Int64] = []
        for _ in 0..<2000 {
            redis.send(RedisCommand("INCR", "counter")) { replies.append((try? $0.get())?.integer ?? -1) }
        }
        #expect(loop.run(until: { replies.count == 2000 }))
        #expect(replies == Array(1...2000))
        let all = try loop.wait { redis.sendAll([RedisCommand("GET", "counter"), RedisCommand("PING"), RedisCommand("BAD")],
                                               completion: $0) }
        #expect(try all[0].get() == .bulk(Array("2000".utf8)))
        #expect(try all[1].get() == .status("PONG"))
        #expect(try all[2].get().errorMessage?.contains("unknown command") == true)
        #expect(redis.statistics.commandsSent >= 2003 && redis.statistics.failedCommands == 0)
        redis.close()
        #expect(loop.destroy() == 0)
    }

    /// The hiredis 0.14.1 hang: its libuv adapter never reported a refused connect. Ours reports
    /// every attempt, backs off (no busy loop) and connects once Redis is there.
    @Test func connectingWhileRedisIsDownFailsPromptlyThenSucceeds() throws {
        let port = RedisServer.freePort()
        let endpoint = try RedisEndpoint(host: "127.0.0.1", port: port)
        let loop = TestLoop()
        let started = loop.now
        let (redis, recorder) = try connect(loop, endpoint, options: .init(commandTimeoutMilliseconds: 400), waitReady: false)
        #expect(loop.run(until: { !recorder.failures.isEmpty }, timeout: 1000), "the first refusal is reported")
        #expect(loop.now - started < 500)
        #expect(recorder.failures.first?.contains("refused") == true, "\(recorder.failures)")
        // A command sent while down waits for its deadline, then fails without having been sent.
        let early = try loop.wait(timeout: 2000) { redis.send(RedisCommand("PING"), completion: $0) }
        guard case .failure(.notSent(let reason)) = early else { Issue.record("\(early)"); return }
        #expect(reason.contains("refused"))
        // Over ~1.5 s of refusals: a handful of attempts (backoff 100 ms doubling), not a busy loop.
        loop.run(for: 1100)
        let attempts = recorder.failures.count
        #expect(attempts >= 3 && attempts <= 7, "\(attempts) attempts in ~1.5 s")
        let delays = recorder.events.compactMap { if case .failed(_, let delay) = $0 { delay } else { nil } }
        #expect(zip(delays, delays.dropFirst()).allSatisfy { $0 < $1 }, "growing waits: \(delays)")
        // A command queued now is sent as soon as Redis is up.
        var late: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING"), timeoutMilliseconds: 5000) { late = $0 }
        let server = try RedisServer(port: port)
        #expect(loop.run(until: { late != nil }, timeout: 5000))
        #expect(try late?.get() == .status("PONG"))
        #expect(recorder.connects == 1)
        redis.close()
        #expect(loop.destroy() == 0)
        _ = server
    }

    @Test func reconnectsAfterRedisIsKilledAndKeepsWhatWasAcknowledged() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (redis, recorder) = try connect(loop, server.endpoint)
        let (other, otherRecorder) = try connect(loop, server.endpoint)
        #expect(try loop.call { redis.send(RedisCommand("SET", "kept", "yes"), completion: $0) } == .status("OK"))
        // A command in flight when Redis dies: its outcome is unknown, and says so.
        var inFlight: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("BLPOP", "nothing", 10), timeoutMilliseconds: 15_000) { inFlight = $0 }
        loop.run(for: 50)
        server.signal(SIGKILL)
        #expect(loop.run(until: { inFlight != nil && !recorder.losses.isEmpty && !otherRecorder.losses.isEmpty }))
        guard case .failure(let error)? = inFlight else { Issue.record("\(String(describing: inFlight))"); return }
        #expect(error.outcomeUnknown)
        loop.run(for: 600)
        try server.launch() // same port, same AOF
        #expect(loop.run(until: { redis.state == .ready && other.state == .ready }, timeout: 5000))
        #expect(try loop.call { redis.send(RedisCommand("GET", "kept"), completion: $0) } == .bulk(Array("yes".utf8)))
        #expect(recorder.connects == 2 && otherRecorder.connects == 2)
        // Jittered: the two connections did not retry in lockstep.
        func delays(_ r: Recorder) -> [Int64] {
            r.events.compactMap {
                switch $0 {
                case .failed(_, let d), .lost(_, let d): d
                case .connected: nil
                }
            }
        }
        #expect(delays(recorder) != delays(otherRecorder), "\(delays(recorder)) vs \(delays(otherRecorder))")
        #expect(delays(recorder).count <= 8, "no busy loop while down: \(delays(recorder))")
        redis.close()
        other.close()
        #expect(loop.destroy() == 0)
    }

    /// A Redis that stops answering (SIGSTOP: the kernel still accepts connections) must not stall
    /// the loop: commands time out, the connection is replaced, reconnects time out until Redis
    /// runs again.
    @Test func commandsTimeOutWhileRedisIsStopped() throws {
        let server = try RedisServer()
        defer { server.signal(SIGCONT) }
        let loop = TestLoop()
        let options = RedisConnection.Options(connectTimeoutMilliseconds: 300, commandTimeoutMilliseconds: 300)
        let (redis, recorder) = try connect(loop, server.endpoint, options: options)
        server.signal(SIGSTOP)
        let sent = loop.now
        let first = try loop.wait(timeout: 3000) { redis.send(RedisCommand("PING"), completion: $0) }
        var second: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING"), timeoutMilliseconds: 10_000) { second = $0 }
        #expect(first == .failure(.timedOut))
        let waited = loop.now - sent
        #expect(waited >= 290 && waited < 1500, "timed out after \(waited) ms")
        // The command's deadline counts from when it was sent, the connection's patience from when
        // it was written: the loss follows the timeout by up to a loop turn (longer under ASan).
        #expect(loop.run(until: { !recorder.losses.isEmpty }, timeout: 1000), "\(recorder.events)")
        #expect(recorder.losses.first?.contains("command timeout") == true, "\(recorder.events)")
        // The connection that followed the timed-out command is replaced; reconnects time out too.
        #expect(loop.run(until: { recorder.failures.contains { $0.contains("timed out") } }, timeout: 3000), "\(recorder.events)")
        server.signal(SIGCONT)
        #expect(loop.run(until: { redis.state == .ready }, timeout: 5000))
        #expect(loop.run(until: { second != nil }, timeout: 5000))
        if case .failure(let error)? = second { #expect(error.outcomeUnknown, "\(error)") }
        #expect(try loop.call { redis.send(RedisCommand("PING"), completion: $0) } == .status("PONG"))
        redis.close()
        #expect(loop.destroy() == 0)
    }

    /// A caller's short timeout fails that command alone; the connection stays (its late reply is
    /// dropped) because Redis answered within the connection's own timeout.
    @Test func aShortCommandTimeoutDoesNotDropAHealthyConnection() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (redis, recorder) = try connect(loop, server.endpoint)
        let started = loop.now
        let slow = try loop.wait { redis.send(RedisCommand("BLPOP", "nothing", "0.3"), timeoutMilliseconds: 100, completion: $0) }
        #expect(slow == .failure(.timedOut))
        #expect(loop.now - started < 290)
        var after: Result<RedisReply, RedisError>?
        redis.send(RedisCommand("PING")) { after = $0 }
        #expect(loop.run(until: { after != nil }))
        #expect(after == .success(.status("PONG")), "answered on the same connection, after the sleep")
        #expect(recorder.losses.isEmpty && redis.statistics.connects == 1 && redis.statistics.replies >= 3)
        redis.close()
        #expect(loop.destroy() == 0)
    }

    @Test func aBlockingReadDoesNotStallAnotherConnection() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (commands, _) = try connect(loop, server.endpoint)
        let (tail, _) = try connect(loop, server.endpoint)
        var read: Result<RedisReply, RedisError>?
        tail.send(RedisCommand("XREAD", "BLOCK", 5000, "STREAMS", "s", "0-0"), timeoutMilliseconds: 8000) { read = $0 }
        var pongs = 0
        let started = loop.now
        for _ in 0..<20 { commands.send(RedisCommand("PING")) { if case .success = $0 { pongs += 1 } } }
        #expect(loop.run(until: { pongs == 20 }, timeout: 2000))
        #expect(read == nil && loop.now - started < 1000, "the other connection was served while the read blocked")
        #expect(try loop.call { commands.send(RedisCommand("XADD", "s", "1-0", "f", "v"), completion: $0) } == .bulk(Array("1-0".utf8)))
        #expect(loop.run(until: { read != nil }, timeout: 2000))
        #expect(try read?.get().array?.count == 1)
        commands.close()
        tail.close()
        #expect(loop.destroy() == 0)
    }

    @Test func scriptsSurviveAFlushedCacheAndARestart() throws {
        let server = try RedisServer()
        let loop = TestLoop()
        let (redis, _) = try connect(loop, server.endpoint)
        let registered = RedisScript(name: "echo", source: "return {KEYS[1], ARGV[1]}")
        let unregistered = RedisScript(name: "incr", source: "return redis.call('INCR', KEYS[1])")
        redis.register(registered)
        let echo = try loop.call { redis.evaluate(registered, keys: ["k"], arguments: ["a\0b"], completion: $0) }
        #expect(echo == .array([.bulk(Array("k".utf8)), .bulk([97, 0, 98])]))
        #expect(try loop.call { redis.evaluate(unregistered, keys: ["n"], arguments: [], completion: $0) } == .integer(1))
        #expect(redis.statistics.scriptReloads == 1, "the unregistered script was not cached yet")
        #expect(try server.command(["SCRIPT", "FLUSH"]) == .status("OK"))
        #expect(try loop.call { redis.evaluate(registered, keys: ["k"], arguments: ["x"], completion: $0) }.array?.count == 2)
        #expect(redis.statistics.scriptReloads == 2)
        // After a restart the registered script is loaded on connect; the other comes back by EVAL.
        server.signal(SIGKILL)
        #expect(loop.run(until: { redis.state != .ready }))
        try server.launch()
        #expect(loop.run(until: { redis.state == .ready }, timeout: 5000))
        #expect(try loop.call { redis.evaluate(registered, keys: ["k"], arguments: ["y"], completion: $0) }.array?.count == 2)
        #expect(redis.statistics.scriptReloads == 2)
        #expect(try loop.call { redis.evaluate(unregistered, keys: ["n"], arguments: [], completion: $0) } == .integer(2))
        #expect(redis.statistics.scriptReloads == 3)
        let broken = RedisScript(name: "broken", source: "return nope(")
        let error = try loop.call { redis.evaluate(broken, keys: [], arguments: [], completion: $0) }
        #expect(error.errorMessage?.contains("compiling") == true || error.errorMessage?.contains("Error") == true, "\(error)")
        redis.close()
        #expect(loop.destroy() == 0)
    }

    @Test func authenticatesAndReportsARefusedPassword() throws {
        let server = try RedisServer(arguments: ["--requirepass", "s3cret"])
        let loop = TestLoop()
        let (good, _) = try connect(loop, server.endpoint, options: .init(clientName: "presence-test", password: "s3cret"))
        let name = try loop.call { good.send(RedisCommand("CLIENT", "GETNAME"), completion: $0) }
        #expect(name == .bulk(Array("presence-test".utf8)))
        let (bad, recorder) = try connect(loop, server.endpoint, options: .init(password: "wrong"), waitReady: false)
        #expect(loop.run(until: { !recorder.failures.isEmpty }))
        #expect(recorder.failures.first?.contains("AUTH refused") == true, "\(recorder.failures)")
        good.close()
        bad.close()
        #expect(loop.destroy() == 0)
    }
}
