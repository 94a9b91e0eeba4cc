import Testing
@testable import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

/// `RedisLogTail`: entries in order from a revision, across namespaces, through a Redis restart,
/// and a gap reported (never skipped) when the log was trimmed.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveTailTests {
    final class Received {
        var revs: [RedisKeys: [UInt64]] = [:]
        var gaps: [(RedisKeys, UInt64, UInt64)] = []
        var failures = 0
    }

    func tail(_ fixture: ClusterFixture, block: Int64 = 200) -> (RedisLogTail, RedisConnection, Received) {
        let connection = RedisConnection(loop: fixture.loop.loop, endpoint: fixture.server.endpoint,
                                         options: .init(commandTimeoutMilliseconds: 1000))
        connection.start()
        let tail = RedisLogTail(connection: connection, blockMilliseconds: block)
        let received = Received()
        tail.onEvent = { event in
            switch event {
            case .entries(let keys, let entries): received.revs[keys, default: []] += entries.map(\.rev)
            case .gap(let keys, let expected, let found): received.gaps.append((keys, expected, found))
            case .failed: received.failures += 1
            }
        }
        return (tail, connection, received)
    }

    @Test func followsFromARevisionAcrossNamespaces() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a")
        for i in 0..<5 { _ = try fixture.append(a, "\(i)") }
        let otherKeys = try RedisKeys(namespace: "other")
        let other = RedisLog(connection: fixture.redis, keys: otherKeys)
        #expect(try fixture.loop.call { other.create(epoch: fixture.epoch, leaseMilliseconds: 5000, completion: $0) }
            == .created(epoch: fixture.epoch))
        let otherMember = NodeLease(connection: fixture.redis, keys: otherKeys, node: a.node, epoch: fixture.epoch)
        _ = try fixture.loop.call { otherMember.join(completion: $0) }
        let (tail, connection, received) = tail(fixture)
        tail.follow(fixture.keys, after: 2)
        tail.follow(otherKeys, after: 0)
        #expect(fixture.loop.run(until: { received.revs[fixture.keys] == [3, 4, 5] }))
        for i in 0..<3 {
            _ = try fixture.append(a, "more \(i)")
            _ = try fixture.loop.call { other.append(node: a.node.id, epoch: fixture.epoch, payload: [UInt8(i)], completion: $0) }
        }
        #expect(fixture.loop.run(until: { received.revs[fixture.keys] == [3, 4, 5, 6, 7, 8] && received.revs[otherKeys] == [1, 2, 3] }),
                "\(received.revs)")
        #expect(received.gaps.isEmpty)
        tail.stop()
        connection.close()
        fixture.finish()
    }

    /// Redis SIGKILLed and restarted under writes (AOF, appendfsync always): the tail delivers every
    /// acknowledged entry exactly once, in order, and resumes by itself.
    @Test func resumesAfterARedisRestartWithNothingLostOrRepeated() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 10_000)
        let a = try fixture.member("a")
        let (tail, connection, received) = tail(fixture)
        tail.follow(fixture.keys, after: 0)
        var acknowledged: [UInt64] = []
        var unknown = 0
        var writing = true
        func write() {
            guard writing else { return }
            fixture.log.append(node: a.node.id, epoch: fixture.epoch, payload: Array("w".utf8)) { result in
                switch result {
                case .success(.appended(let rev, _)): acknowledged.append(rev)
                case .failure(let error) where error.outcomeUnknown: unknown += 1
                default: break
                }
                write()
            }
        }
        write()
        fixture.loop.run(for: 300)
        fixture.server.signal(SIGKILL)
        fixture.loop.run(for: 300)
        try fixture.server.launch()
        fixture.loop.run(for: 800)
        writing = false
        let head = try fixture.headRev
        #expect(acknowledged.count > 10 && acknowledged.last! <= head)
        #expect(fixture.loop.run(until: { received.revs[fixture.keys]?.last == head }, timeout: 5000), "\(head)")
        let delivered = received.revs[fixture.keys] ?? []
        #expect(delivered == Array(1...head), "every entry once, in order")
        #expect(Set(acknowledged).isSubset(of: Set(delivered)), "every acknowledged write is in the log")
        #expect(received.failures >= 1, "the tail saw the outage")
        tail.stop()
        connection.close()
        fixture.finish()
    }

    @Test func reportsAGapWhenTheLogWasTrimmedPastIt() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a")
        for i in 0..<10 { _ = try fixture.append(a, "\(i)") }
        _ = try fixture.command("XTRIM", fixture.keys.log, "MINID", "6")
        let (tail, connection, received) = tail(fixture)
        tail.follow(fixture.keys, after: 2)
        #expect(fixture.loop.run(until: { !received.gaps.isEmpty }))
        #expect(received.gaps.first?.1 == 3 && received.gaps.first?.2 == 6)
        #expect(received.revs[fixture.keys] == nil, "nothing after a gap is delivered")
        #expect(tail.following[fixture.keys] == nil)
        tail.follow(fixture.keys, after: 5) // after loading a snapshot at 5
        #expect(fixture.loop.run(until: { received.revs[fixture.keys] == [6, 7, 8, 9, 10] }))
        tail.stop()
        connection.close()
        fixture.finish()
    }
}
