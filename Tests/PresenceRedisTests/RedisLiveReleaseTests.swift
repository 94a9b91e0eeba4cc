import Testing
@testable import PresenceRedis

/// RELEASE: an idle node leaves a namespace's lease table quietly, only when nobody's sessions
/// depend on it, and may join again under the same id. BEAT says when REAP has work.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveReleaseTests {
    @Test func anIdleNodeReleasesAndJoinsAgainUnderTheSameID() throws {
        let fixture = try ClusterFixture()
        let idle = try fixture.member("idle"), other = try fixture.member("other")
        let head = try fixture.headRev
        #expect(try fixture.loop.call { idle.release(completion: $0) } == .released)
        #expect(try fixture.headRev == head, "no log entry: nobody declares a released node dead")
        #expect(try fixture.command("HEXISTS", fixture.keys.nodes, idle.node.id) == .integer(0))
        #expect(try fixture.command("HEXISTS", fixture.keys.down, idle.node.id) == .integer(0))
        #expect(try fixture.beat(idle) == .unknown, "no beat while released")
        #expect(try fixture.append(idle, "x") == .fenced, "and no write under the released lease")
        #expect(try fixture.loop.call { idle.release(completion: $0) } == .fenced)
        let rejoined = try fixture.loop.call { idle.join(completion: $0) }
        guard case .joined(_, _, let replaced) = rejoined else {
            Issue.record("join again"); return
        }
        #expect(replaced.isEmpty)
        guard case .appended = try fixture.append(idle, "back") else { Issue.record("write after the rejoin"); return }
        guard case .alive(_, _, reapDue: false) = try fixture.beat(other) else {
            Issue.record("the other node is untouched, with nothing to reap"); return
        }
        fixture.finish()
    }

    @Test func aNodeWithSessionsOrANodeToReapKeepsItsLease() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let owner = try fixture.member("owner")
        #expect(try fixture.loop.call { fixture.sessions(owner).put("S", ops: [1], completion: $0) } == .done)
        #expect(try fixture.loop.call { owner.release(completion: $0) } == .busy(reason: "sessions"))
        #expect(try fixture.loop.call { fixture.sessions(owner).drop("S", completion: $0) } == .done)
        // Another node's lease expires: whoever would release must reap it first.
        let dying = try fixture.member("dying")
        #expect(try fixture.loop.call { fixture.sessions(dying).put("T", ops: [1], completion: $0) } == .done)
        for _ in 0..<6 {
            fixture.loop.run(for: 250)
            _ = try fixture.beat(owner)
        }
        #expect(try fixture.loop.call { owner.release(completion: $0) } == .busy(reason: "expired"))
        guard case .alive(_, _, reapDue: true) = try fixture.beat(owner) else { Issue.record("BEAT says REAP has work"); return }
        let reap = try fixture.loop.call { owner.reap(now: 1, graceMilliseconds: 0, batch: 1, completion: $0) }
        guard case .reaped(let reaped) = reap, reaped.adopted.map({ $0.id }) == ["T"] else { Issue.record("\(reap)"); return }
        #expect(try fixture.loop.call { owner.release(completion: $0) } == .busy(reason: "sessions"), "it holds what it adopted")
        fixture.finish()
    }
}
