import Testing
@testable import PresenceRedis

/// SESSION `change`: an edit of a large queue is appended to the record in O(1), and every reader
/// (record, TAKEOVER, REAP) gets the last whole `put` with the changes in order.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveSessionChangeTests {
    @Test func changesAreAppendedInOrderAndAPutForgetsThem() throws {
        let fixture = try ClusterFixture()
        let a = fixture.sessions(try fixture.member("a")), b = fixture.sessions(try fixture.member("b"))
        let loop = fixture.loop
        #expect(try loop.call { a.append("S", change: [9], completion: $0) } == .absent, "no record to change")
        #expect(try loop.call { a.put("S", ops: [1], completion: $0) } == .done)
        for change: UInt8 in 2...4 {
            #expect(try loop.call { a.append("S", change: [change], completion: $0) } == .done)
        }
        #expect(try loop.call { b.append("S", change: [7], completion: $0) } == .notOwner(owner: a.node))
        #expect(try loop.call { a.record("S", completion: $0) }
            == SessionRecord(id: "S", owner: a.node, state: .live, ops: [1], changes: [[2], [3], [4]]))
        // A whole put replaces the ops and forgets the changes.
        #expect(try loop.call { a.put("S", ops: [5], completion: $0) } == .done)
        #expect(try fixture.command("HLEN", fixture.keys.session("S")) == .integer(3), "owner, state, ops: no change left")
        #expect(try loop.call { a.append("S", change: [6], completion: $0) } == .done)
        #expect(try loop.call { a.hold("S", disconnectedAt: 10, runAt: 20, completion: $0) } == .done)
        #expect(try loop.call { a.append("S", change: [8], completion: $0) } == .done, "a held session's ops can still be cancelled")
        #expect(try loop.call { a.record("S", completion: $0) }
            == SessionRecord(id: "S", owner: a.node, state: .held, disconnectedAt: 10, runAt: 20, ops: [5], changes: [[6], [8]]))
        fixture.finish()
    }

    @Test func anAppendCostsTheSameWhateverTheNumberOfChanges() throws {
        let fixture = try ClusterFixture()
        let a = fixture.sessions(try fixture.member("a"))
        let loop = fixture.loop
        #expect(try loop.call { a.put("S", ops: Array(repeating: 1, count: 100), completion: $0) } == .done)
        let change = Array(repeating: UInt8(2), count: 50)
        for _ in 0..<2_000 { a.append("S", change: change) { _ in } }
        #expect(try loop.call { a.append("S", change: change, completion: $0) } == .done)
        // Each append stored one field of its own size: nothing was rewritten.
        #expect(try fixture.command("HLEN", fixture.keys.session("S")) == .integer(4 + 2_001))
        #expect(try fixture.command("HSTRLEN", fixture.keys.session("S"), "c2001") == .integer(50))
        #expect(try fixture.command("HSTRLEN", fixture.keys.session("S"), "ops") == .integer(100))
        let record = try loop.call { a.record("S", completion: $0) }
        #expect(record?.changes.count == 2_001 && record?.changes.allSatisfy { $0 == change } == true)
        fixture.finish()
    }

    @Test func takeoverAndReapingHandOverTheChanges() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let dying = try fixture.member("x"), reaper = try fixture.member("r"), taker = try fixture.member("t")
        let loop = fixture.loop
        for id in ["S1", "S2"] {
            #expect(try loop.call { fixture.sessions(dying).put(id, ops: [1], completion: $0) } == .done)
            #expect(try loop.call { fixture.sessions(dying).append(id, change: [2], completion: $0) } == .done)
            #expect(try loop.call { fixture.sessions(dying).append(id, change: [3], completion: $0) } == .done)
        }
        let taken = try loop.call { fixture.sessions(taker).takeover("S1", now: 5_000, graceMilliseconds: 3000, completion: $0) }
        guard case .taken(_, let record) = taken else { Issue.record("\(taken)"); return }
        #expect(record.ops == [1] && record.changes == [[2], [3]])
        let again = try loop.call { fixture.sessions(taker).takeover("S1", now: 5_000, graceMilliseconds: 3000, completion: $0) }
        guard case .alreadyOwned(let owned) = again else { Issue.record("\(again)"); return }
        #expect(owned.changes == [[2], [3]])
        for _ in 0..<6 {
            loop.run(for: 250)
            _ = try fixture.beat(reaper)
            _ = try fixture.beat(taker)
        }
        let reaped = try loop.call { reaper.reap(now: 50_000, graceMilliseconds: 3000, completion: $0) }
        guard case .reaped(let result) = reaped, let adopted = result.adopted.first else { Issue.record("\(reaped)"); return }
        #expect(result.adopted.count == 1 && adopted.id == "S2" && adopted.ops == [1] && adopted.changes == [[2], [3]])
        fixture.finish()
    }
}
