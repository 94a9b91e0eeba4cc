import Testing
@testable import PresenceRedis

/// Session records: only the owner changes them; takeover moves them and tells the old owner.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveSessionTests {
    @Test func onlyTheOwnerChangesARecord() throws {
        let fixture = try ClusterFixture()
        let a = fixture.sessions(try fixture.member("a")), b = fixture.sessions(try fixture.member("b"))
        let loop = fixture.loop
        #expect(try loop.call { a.put("S", ops: [1, 0, 2], completion: $0) } == .done)
        #expect(try loop.call { a.record("S", completion: $0) } == SessionRecord(id: "S", owner: a.node, state: .live, ops: [1, 0, 2]))
        #expect(try loop.call { b.put("S", ops: [3], completion: $0) } == .notOwner(owner: a.node))
        #expect(try loop.call { b.hold("S", disconnectedAt: 1, runAt: 2, completion: $0) } == .notOwner(owner: a.node))
        #expect(try loop.call { b.drop("S", completion: $0) } == .notOwner(owner: a.node))
        #expect(try loop.call { a.hold("S", disconnectedAt: 100, runAt: 3100, completion: $0) } == .done)
        #expect(try loop.call { a.record("S", completion: $0) }
            == SessionRecord(id: "S", owner: a.node, state: .held, disconnectedAt: 100, runAt: 3100, ops: [1, 0, 2]))
        #expect(try loop.call { a.put("S", ops: [4], completion: $0) } == .done, "new ops make it live again")
        #expect(try loop.call { a.record("S", completion: $0) } == SessionRecord(id: "S", owner: a.node, state: .live, ops: [4]))
        #expect(try loop.call { a.drop("S", completion: $0) } == .done)
        #expect(try loop.call { a.drop("S", completion: $0) } == .absent)
        #expect(try loop.call { a.hold("S", disconnectedAt: 1, runAt: 2, completion: $0) } == .absent)
        #expect(try fixture.command("SCARD", fixture.keys.owned(by: a.node)) == .integer(0))
        let tooLong = String(repeating: "x", count: 257)
        #expect(try loop.wait { a.put(tooLong, ops: [], completion: $0) } == .failure(.notSent("session id must be 1-256 bytes")))
        let wrong = RedisSessions(member: NodeLease(connection: fixture.redis, keys: fixture.keys, node: a.member.node, epoch: "old"))
        #expect(try loop.call { wrong.put("T", ops: [], completion: $0) } == .epochMismatch(current: fixture.epoch))
        fixture.finish()
    }

    @Test func takeoverMovesTheSessionAndLogsItForTheOldOwner() throws {
        let fixture = try ClusterFixture()
        let aLease = try fixture.member("a"), bLease = try fixture.member("b"), cLease = try fixture.member("c")
        let a = fixture.sessions(aLease), b = fixture.sessions(bLease), c = fixture.sessions(cLease)
        let loop = fixture.loop
        #expect(try loop.call { a.put("S", ops: [5], completion: $0) } == .done)
        let taken = try loop.call { b.takeover("S", now: 10_000, graceMilliseconds: 3000, completion: $0) }
        guard case .taken(let rev, let record) = taken else { Issue.record("\(taken)"); return }
        #expect(record == SessionRecord(id: "S", owner: b.node, state: .held, disconnectedAt: 10_000, runAt: 13_000, ops: [5],
                                        previousOwner: a.node, previousState: .live))
        let entry = try fixture.entries().last
        #expect(entry?.rev == rev && entry?.node == b.node && entry?.body == .takeover(session: "S", from: a.node))
        #expect(try fixture.append(aLease, "x", claim: .own("S")) == .notOwner(owner: b.node), "the old owner lost it")
        #expect(try fixture.command("SISMEMBER", fixture.keys.owned(by: a.node), "S") == .integer(0))
        #expect(try fixture.command("SISMEMBER", fixture.keys.owned(by: b.node), "S") == .integer(1))
        let again = try loop.call { b.takeover("S", now: 11_000, graceMilliseconds: 3000, completion: $0) }
        #expect(again == .alreadyOwned(SessionRecord(id: "S", owner: b.node, state: .held, disconnectedAt: 10_000, runAt: 13_000, ops: [5])))
        // A held session keeps its times when it moves on.
        let answer4 = try loop.call { c.takeover("S", now: 12_000, graceMilliseconds: 3000, completion: $0) }
        guard case .taken(_, let moved) = answer4 else {
            Issue.record("second takeover"); return
        }
        #expect(moved.disconnectedAt == 10_000 && moved.runAt == 13_000 && moved.previousState == .held && moved.previousOwner == b.node)
        #expect(try loop.call { c.takeover("none", now: 0, graceMilliseconds: 0, completion: $0) } == .absent)
        _ = cLease
        fixture.finish()
    }

    @Test func takingOverFromADeadOwnerDatesTheSessionAtItsLastBeat() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let dying = try fixture.member("x")
        let taker = try fixture.member("y")
        #expect(try fixture.loop.call { fixture.sessions(dying).put("S", ops: [1], completion: $0) } == .done)
        guard case .alive(let lastBeat, _, _) = try fixture.beat(dying) else { Issue.record("beat"); return }
        for _ in 0..<5 {
            fixture.loop.run(for: 250)
            _ = try fixture.beat(taker)
        }
        let now = lastBeat + 60_000 // the taker's clock, far ahead
        let taken = try fixture.loop.call { fixture.sessions(taker).takeover("S", now: now, graceMilliseconds: 3000, completion: $0) }
        guard case .taken(_, let record) = taken else { Issue.record("\(taken)"); return }
        #expect(record.disconnectedAt == lastBeat, "not later than the dead owner's last beat")
        #expect(record.runAt == now + 3000)
        fixture.finish()
    }
}
