import Testing
@testable import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

/// The log: CREATE, SEQ (what it checks, consecutive revisions), reading it back, tailing it.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveLogTests {
    @Test func scriptHashesMatchRedis() throws {
        let fixture = try ClusterFixture()
        for script in RedisScripts.all {
            #expect(try fixture.command("SCRIPT", "LOAD", script.source) == .bulk(Array(script.sha1.utf8)), "\(script.name)")
        }
        fixture.finish()
    }

    @Test func theLogIsCreatedOnceAndAnOrphanLogIsRefused() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 4000)
        let again = try fixture.loop.call { fixture.log.create(epoch: "other", leaseMilliseconds: 1, completion: $0) }
        #expect(again == .exists(epoch: fixture.epoch, rev: 0))
        let head = try fixture.loop.call { fixture.log.head(completion: $0) }
        #expect(head == RedisLog.Head(rev: 0, epoch: fixture.epoch, leaseMilliseconds: 4000, snapshot: 0, previousSnapshot: 0, min: 1))
        let none = RedisLog(connection: fixture.redis, keys: try RedisKeys(namespace: "none"))
        #expect(try fixture.loop.call { none.head(completion: $0) } == nil)
        // A log whose head was deleted by hand is not silently restarted at rev 0.
        let a = try fixture.member("a")
        _ = try fixture.append(a, "x")
        _ = try fixture.command("DEL", fixture.keys.head)
        let orphan = try fixture.loop.call { fixture.log.create(epoch: "new", leaseMilliseconds: 1, completion: $0) }
        #expect(orphan == .orphanLog)
        fixture.finish()
    }

    @Test func sequenceAssignsConsecutiveRevisionsInPipelineOrder() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a"), b = try fixture.member("b")
        var results: [RedisLog.Append] = []
        for i in 0..<200 {
            let node = i % 3 == 0 ? b : a
            let payload: [UInt8] = [0, UInt8(i % 256), 13, 10] + Array("entry \(i)".utf8)
            fixture.log.append(node: node.node.id, epoch: fixture.epoch, payload: payload) { results.append(try! $0.get()) }
        }
        #expect(fixture.loop.run(until: { results.count == 200 }))
        let revs = results.compactMap { if case .appended(let rev, _) = $0 { rev } else { nil } }
        #expect(revs == Array(1...200))
        let entries = try fixture.entries()
        #expect(entries.map(\.rev) == Array(1...200))
        for (i, entry) in entries.enumerated() {
            #expect(entry.body == .proposal([0, UInt8(i % 256), 13, 10] + Array("entry \(i)".utf8)))
            #expect(entry.node == (i % 3 == 0 ? b : a).node.id)
        }
        #expect(try fixture.entries(after: 190).map(\.rev) == Array(191...200))
        #expect(try fixture.headRev == 200)
        fixture.finish()
    }

    @Test func sequenceRefusesAStaleEpochAnUnknownNodeAndAnExpiredLeaseWithoutUsingARevision() throws {
        let fixture = try ClusterFixture(leaseMilliseconds: 1000)
        let a = try fixture.member("a")
        #expect(try fixture.append(a, "1") == .appended(rev: 1, redisTime: fixture.lastTime()))
        let stale = try fixture.loop.call { fixture.log.append(node: a.node.id, epoch: "old", payload: [1], completion: $0) }
        #expect(stale == .epochMismatch(current: fixture.epoch))
        let stranger = try fixture.loop.call { fixture.log.append(node: "x#1", epoch: fixture.epoch, payload: [1], completion: $0) }
        #expect(stranger == .fenced)
        fixture.loop.run(for: 1100)
        #expect(try fixture.append(a, "late") == .fenced, "the lease ran out")
        let late = try fixture.beat(a)
        guard case .expired = late else { Issue.record("beat after expiry: \(late)"); return }
        #expect(try fixture.headRev == 1)
        #expect(try fixture.command("XLEN", fixture.keys.log) == .integer(1))
        // Redis came back empty: the epoch is gone, and so is every write.
        _ = try fixture.command("FLUSHALL")
        let empty = try fixture.loop.call { fixture.log.append(node: a.node.id, epoch: fixture.epoch, payload: [1], completion: $0) }
        #expect(empty == .epochMismatch(current: nil))
        fixture.finish()
    }

    @Test func sequenceChecksTheOwnerOfAClaimedSessionAndRunDeletesIt() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a"), b = try fixture.member("b")
        #expect(try fixture.loop.call { fixture.sessions(a).put("S", ops: [7], completion: $0) } == .done)
        #expect(try fixture.append(b, "x", claim: .own("S")) == .notOwner(owner: a.node.id))
        #expect(try fixture.append(b, "x", claim: .run("S")) == .notOwner(owner: a.node.id))
        guard case .appended = try fixture.append(a, "mine", claim: .own("S")) else { Issue.record("own"); return }
        guard case .appended = try fixture.append(a, "run ops", claim: .run("S")) else { Issue.record("run"); return }
        #expect(try fixture.loop.call { fixture.sessions(a).record("S", completion: $0) } == nil)
        #expect(try fixture.command("SISMEMBER", fixture.keys.owned(by: a.node.id), "S") == .integer(0))
        #expect(try fixture.append(a, "twice", claim: .run("S")) == .notOwner(owner: ""), "ops run once")
        #expect(try fixture.headRev == 2)
        fixture.finish()
    }

    @Test func aFailedAppendGivesItsRevisionBack() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a")
        // Someone wrote into the stream by hand, ahead of the head: XADD <rev>-0 must fail.
        _ = try fixture.command("XADD", fixture.keys.log, "5-0", "k", "p")
        let result = try fixture.loop.wait { fixture.log.append(node: a.node.id, epoch: fixture.epoch, payload: [1], completion: $0) }
        guard case .failure(.unexpectedReply(let message)) = result else { Issue.record("\(result)"); return }
        #expect(message.contains("seq"))
        #expect(try fixture.headRev == 0, "no revision without its entry")
        fixture.finish()
    }
}

extension ClusterFixture {
    /// The `t` of the newest entry (the Redis time SEQ answered with).
    func lastTime() throws -> Int64 { try entries().last?.time ?? 0 }
}
