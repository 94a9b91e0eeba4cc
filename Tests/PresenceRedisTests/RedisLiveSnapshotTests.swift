import Testing
@testable import PresenceRedis

/// Snapshot bookkeeping: one snapper at a time, chunks only under its lease, publish with two
/// generations kept, and the log trimmed below the snapshot, never past it.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveSnapshotTests {
    func snapshots(_ fixture: ClusterFixture, _ lease: NodeLease) -> RedisSnapshots { RedisSnapshots(member: lease) }

    func load(_ fixture: ClusterFixture, _ snapshots: RedisSnapshots, rev: UInt64) throws -> ([String: [UInt8]], Int?) {
        var chunks: [String: [UInt8]] = [:]
        var expected: Int?
        var cursor: UInt64 = 0
        repeat {
            let page = try fixture.loop.call { snapshots.page(rev: rev, cursor: cursor, count: 2, completion: $0) }
            chunks.merge(page.chunks) { $1 }
            expected = page.expectedCount ?? expected
            cursor = page.cursor
        } while cursor != 0
        return (chunks, expected)
    }

    @Test func publishingKeepsTwoGenerationsAndTrimsTheLogBelowTheSnapshot() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a"), b = try fixture.member("b")
        for i in 0..<250 { _ = try fixture.append(a, "\(i)") }
        let mine = snapshots(fixture, a), theirs = snapshots(fixture, b)
        let loop = fixture.loop
        #expect(try loop.call { mine.begin(rev: 240, leaseMilliseconds: 10_000, completion: $0) } == .started)
        #expect(try loop.call { theirs.begin(rev: 240, leaseMilliseconds: 10_000, completion: $0) } == .busy(holder: a.node.id))
        #expect(try loop.call { mine.write(rev: 240, chunks: [("users", [1, 2]), ("rules", [0])], completion: $0) } == true)
        #expect(try loop.call { mine.write(rev: 240, chunks: [("more", Array("x".utf8))], completion: $0) } == true)
        let published = try loop.call { mine.finish(rev: 240, chunkCount: 3, trimBelow: 200, completion: $0) }
        guard case .published(let min) = published else { Issue.record("\(published)"); return }
        // Trimming is approximate (whole stream nodes of 100 entries): some entries go, never one above 200.
        #expect(min > 1 && min <= 200, "min \(min)")
        #expect(try fixture.entries(after: min - 1).first?.rev == min)
        #expect(try fixture.entries(after: 0).first?.rev == min)
        let head = try loop.call { fixture.log.head(completion: $0) }
        #expect(head?.snapshot == 240 && head?.previousSnapshot == 0 && head?.min == min && head?.rev == 250)
        let (chunks, expected) = try load(fixture, theirs, rev: 240)
        #expect(chunks == ["users": [1, 2], "rules": [0], "more": Array("x".utf8)] && expected == 3)
        // Not newer, or past the head: refused.
        #expect(try loop.call { mine.begin(rev: 240, leaseMilliseconds: 10_000, completion: $0) } == .stale(snapshot: 240, head: 250))
        #expect(try loop.call { mine.begin(rev: 251, leaseMilliseconds: 10_000, completion: $0) } == .stale(snapshot: 240, head: 250))
        // Two more snapshots: the previous one stays for loaders, the one before is deleted.
        for rev: UInt64 in [245, 250] {
            #expect(try loop.call { mine.begin(rev: rev, leaseMilliseconds: 10_000, completion: $0) } == .started)
            #expect(try loop.call { mine.write(rev: rev, chunks: [("all", [UInt8(rev % 256)])], completion: $0) } == true)
            let answer3 = try loop.call { mine.finish(rev: rev, chunkCount: 1, trimBelow: 0, completion: $0) }
            guard case .published = answer3 else {
                Issue.record("publish \(rev)"); return
            }
        }
        #expect(try fixture.command("EXISTS", fixture.keys.snapshot(240)) == .integer(0))
        #expect(try fixture.command("EXISTS", fixture.keys.snapshot(245)) == .integer(1))
        let last = try loop.call { fixture.log.head(completion: $0) }
        #expect(last?.snapshot == 250 && last?.previousSnapshot == 245 && last?.min == min, "trimBelow 0 trims nothing")
        fixture.finish()
    }

    @Test func aSnapperThatLostItsLeaseCannotWriteOrPublish() throws {
        let fixture = try ClusterFixture()
        let a = try fixture.member("a"), b = try fixture.member("b")
        for i in 0..<20 { _ = try fixture.append(a, "\(i)") }
        let slow = snapshots(fixture, a), fast = snapshots(fixture, b)
        let loop = fixture.loop
        #expect(try loop.call { slow.begin(rev: 10, leaseMilliseconds: 150, completion: $0) } == .started)
        #expect(try loop.call { slow.write(rev: 10, chunks: [("part", [1])], completion: $0) } == true)
        loop.run(for: 250)
        #expect(try loop.call { fast.begin(rev: 15, leaseMilliseconds: 10_000, completion: $0) } == .started)
        #expect(try fixture.command("EXISTS", fixture.keys.snapshot(10)) == .integer(0), "the stale partial snapshot is gone")
        #expect(try loop.call { slow.write(rev: 10, chunks: [("part", [2])], completion: $0) } == false)
        #expect(try fixture.command("EXISTS", fixture.keys.snapshot(10)) == .integer(0), "and stays gone")
        #expect(try loop.call { slow.finish(rev: 10, chunkCount: 1, trimBelow: 5, completion: $0) } == .lost)
        #expect(try loop.call { fast.finish(rev: 15, chunkCount: 0, trimBelow: 5, completion: $0) } != .lost)
        let bad = try loop.wait { fast.write(rev: 15, chunks: [(".count", [1])], completion: $0) }
        guard case .failure(.notSent) = bad else { Issue.record("reserved chunk id: \(bad)"); return }
        fixture.finish()
    }
}
