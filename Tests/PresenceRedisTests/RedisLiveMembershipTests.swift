import Testing
@testable import PresenceRedis

/// Leases on Redis's clock: join, beat, expiry that is never undone, a new incarnation replacing
/// the old one, a graceful leave, and reaping with the adoption of sessions in batches.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveMembershipTests {
    @Test func anExpiredLeaseIsNeverRenewed() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let a = try fixture.member("a")
        let joined = try fixture.loop.call { a.join(completion: $0) }
        guard case .joined(_, 1000, []) = joined else { Issue.record("rejoin of a live id is a beat: \(joined)"); return }
        _ = try fixture.append(a, "x")
        guard case .alive(_, 1, _) = try fixture.beat(a) else { Issue.record("beat"); return }
        fixture.loop.run(for: 1100)
        guard case .expired = try fixture.beat(a) else { Issue.record("expired"); return }
        guard case .expired = try fixture.beat(a) else { Issue.record("still expired"); return }
        #expect(try fixture.loop.call { a.join(completion: $0) } == .expired, "the same id cannot come back")
        let stranger = NodeLease(connection: fixture.redis, keys: fixture.keys, node: try NodeIdentity(name: "z"), epoch: fixture.epoch)
        #expect(try fixture.beat(stranger) == .unknown)
        let wrongEpoch = NodeLease(connection: fixture.redis, keys: fixture.keys, node: a.node, epoch: "nope")
        #expect(try fixture.beat(wrongEpoch) == .epochMismatch(current: fixture.epoch))
        #expect(try fixture.loop.call { wrongEpoch.join(completion: $0) } == .epochMismatch(current: fixture.epoch))
        fixture.finish()
    }

    @Test func aNewIncarnationDeclaresTheOldOneDeadAtOnce() throws {
        let fixture = try ClusterFixture()
        let old = try fixture.member("127.0.0.1:9001")
        let other = try fixture.member("127.0.0.1:90011") // a name that merely starts the same
        #expect(try fixture.loop.call { fixture.sessions(old).put("S", ops: [1, 2], completion: $0) } == .done)
        let restarted = NodeLease(connection: fixture.redis, keys: fixture.keys, node: try NodeIdentity(name: "127.0.0.1:9001"),
                                  epoch: fixture.epoch)
        let answer1 = try fixture.loop.call { restarted.join(completion: $0) }
        guard case .joined(_, _, let replaced) = answer1 else {
            Issue.record("join"); return
        }
        #expect(replaced == [old.node.id])
        guard case .nodeDead(old.node.id, _)? = try fixture.entries().last?.body else { Issue.record("dead entry"); return }
        #expect(try fixture.beat(old) == .unknown)
        #expect(try fixture.append(old, "zombie") == .fenced)
        #expect(try fixture.loop.call { old.join(completion: $0) } == .dead)
        guard case .alive = try fixture.beat(other) else { Issue.record("the other node is untouched"); return }
        // Its session goes to whoever reaps first, dated at the old incarnation's last beat.
        let reaped = try fixture.loop.call { restarted.reap(now: 1_000, graceMilliseconds: 3000, completion: $0) }
        guard case .reaped(let result) = reaped, let adopted = result.adopted.first else { Issue.record("\(reaped)"); return }
        #expect(result.dead.isEmpty, "already declared dead by the join")
        #expect(adopted.id == "S" && adopted.owner == restarted.node.id && adopted.previousOwner == old.node.id)
        #expect(adopted.ops == [1, 2] && adopted.runAt == 4_000 && adopted.previousState == .live)
        #expect(try fixture.command("HEXISTS", fixture.keys.down, old.node.id) == .integer(0), "nothing left to adopt")
        fixture.finish()
    }

    @Test func reapingAdoptsTheSessionsOfExpiredNodesInBatches() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let dying = try fixture.member("x")
        let reaper = try fixture.member("r")
        for id in ["S1", "S2", "S3"] {
            #expect(try fixture.loop.call { fixture.sessions(dying).put(id, ops: Array(id.utf8), completion: $0) } == .done)
        }
        #expect(try fixture.loop.call { fixture.sessions(dying).hold("S3", disconnectedAt: 111, runAt: 222, completion: $0) } == .done)
        guard case .alive(let lastBeat, _, _) = try fixture.beat(dying) else { Issue.record("beat"); return }
        for _ in 0..<5 {
            fixture.loop.run(for: 250)
            guard case .alive = try fixture.beat(reaper) else { Issue.record("reaper beat"); return }
        }
        // Too early for nobody: the reaper's own lease is fine, the other one has run out.
        let first = try fixture.loop.call { reaper.reap(now: 50_000, graceMilliseconds: 3000, batch: 2, completion: $0) }
        guard case .reaped(let one) = first else { Issue.record("\(first)"); return }
        #expect(one.dead == [NodeLease.DeadNode(node: dying.node.id, lastBeat: lastBeat)])
        #expect(one.adopted.count == 2 && one.more)
        let second = try fixture.loop.call { reaper.reap(now: 50_000, graceMilliseconds: 3000, batch: 2, completion: $0) }
        guard case .reaped(let two) = second else { Issue.record("\(second)"); return }
        #expect(two.dead.isEmpty && two.adopted.count == 1 && !two.more)
        let adopted = Dictionary(uniqueKeysWithValues: (one.adopted + two.adopted).map { ($0.id, $0) })
        #expect(Set(adopted.keys) == ["S1", "S2", "S3"])
        for id in ["S1", "S2"] {
            #expect(adopted[id]?.disconnectedAt == lastBeat && adopted[id]?.runAt == 53_000, "live: dated at the last beat")
        }
        #expect(adopted["S3"]?.disconnectedAt == 111 && adopted["S3"]?.runAt == 222, "held: keeps its times")
        #expect(adopted.values.allSatisfy { $0.owner == reaper.node.id && $0.state == .held && $0.ops == Array($0.id.utf8) })
        let record = try fixture.loop.call { fixture.sessions(reaper).record("S1", completion: $0) }
        #expect(record?.owner == reaper.node.id && record?.state == .held)
        #expect(try fixture.command("SCARD", fixture.keys.owned(by: reaper.node.id)) == .integer(3))
        #expect(try fixture.command("HLEN", fixture.keys.down) == .integer(0))
        guard case .nodeDead(dying.node.id, lastBeat)? = try fixture.entries().last?.body else { Issue.record("dead entry"); return }
        // The dead node can do nothing any more.
        #expect(try fixture.beat(dying) == .unknown)
        #expect(try fixture.loop.call { fixture.sessions(dying).put("S4", ops: [], completion: $0) } == .fenced)
        #expect(try fixture.append(dying, "late") == .fenced)
        fixture.finish()
    }

    @Test func aGracefulLeaveHandsLiveSessionsOverDatedAtTheLeave() throws {
        let fixture = try ClusterFixture()
        let leaving = try fixture.member("x")
        let survivor = try fixture.member("r")
        #expect(try fixture.loop.call { fixture.sessions(leaving).put("S", ops: [9], completion: $0) } == .done)
        let answer2 = try fixture.loop.call { leaving.leave(now: 5_555, completion: $0) }
        guard case .left(let rev) = answer2 else {
            Issue.record("leave"); return
        }
        #expect(try fixture.entries().last == RedisLogEntry(rev: rev, node: leaving.node.id, time: fixture.lastTime(), body: .nodeLeft(at: 5_555)))
        #expect(try fixture.append(leaving, "after") == .fenced)
        #expect(try fixture.loop.call { leaving.leave(now: 6_000, completion: $0) } == .fenced)
        let reaped = try fixture.loop.call { survivor.reap(now: 6_000, graceMilliseconds: 3000, completion: $0) }
        guard case .reaped(let result) = reaped else { Issue.record("\(reaped)"); return }
        #expect(result.dead.isEmpty && result.adopted.map(\.id) == ["S"])
        #expect(result.adopted.first?.disconnectedAt == 5_555 && result.adopted.first?.runAt == 9_000)
        // A node without a lease cannot reap.
        let stranger = NodeLease(connection: fixture.redis, keys: fixture.keys, node: try NodeIdentity(name: "z"), epoch: fixture.epoch)
        #expect(try fixture.loop.call { stranger.reap(now: 0, graceMilliseconds: 0, completion: $0) } == .fenced)
        fixture.finish()
    }
}
