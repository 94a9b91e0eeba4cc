import Testing
@testable import PresenceRedis

/// SEED (`HistorySeed`, `presence-server redis-seed`): an operator's acceptance of a new history
/// after Redis lost one, on a blocking connection of its own.
@Suite(.serialized, .enabled(if: RedisServer.liveTestsEnabled)) struct RedisLiveSeedTests {
    private func seed(_ fixture: ClusterFixture, _ namespace: String, _ mode: HistorySeed.Mode) throws -> HistorySeed.Outcome {
        try HistorySeed.seed(fixture.server.endpoint, keys: try RedisKeys(namespace: namespace), mode: mode,
                             leaseMilliseconds: 4000, timeoutMilliseconds: 2000).get()
    }

    @Test func anEmptyHistoryIsCreatedOnlyWhereNoneIsAndMarkedAccepted() throws {
        let fixture = try ClusterFixture()
        guard case .seeded(let epoch) = try seed(fixture, "lost", .empty) else { Issue.record("not seeded"); return }
        let lost = RedisLog(connection: fixture.redis, keys: try RedisKeys(namespace: "lost"))
        let head = try fixture.loop.call { lost.head(completion: $0) }
        #expect(head == RedisLog.Head(rev: 0, epoch: epoch, leaseMilliseconds: 4000, snapshot: 0, previousSnapshot: 0, min: 1))
        #expect(try fixture.command("HGET", "presence:{lost}:head", "seeded").integer ?? 0 > 0)
        // Nodes create and join it as any log: CREATE answers EXISTS with the seeded epoch.
        #expect(try fixture.loop.call { lost.create(epoch: "other", leaseMilliseconds: 1, completion: $0) } == .exists(epoch: epoch, rev: 0))
        // Seeding again changes nothing: the accepted history stays.
        #expect(try seed(fixture, "lost", .empty) == .exists(epoch: epoch, rev: 0, seeded: true))
        // A history nobody accepted (the fixture's) is never replaced by an empty one.
        #expect(try seed(fixture, "demo", .empty) == .exists(epoch: fixture.epoch, rev: 0, seeded: false))
        fixture.finish()
    }

    @Test func anExistingHistoryIsAcceptedAsItIs() throws {
        let fixture = try ClusterFixture()
        _ = try fixture.append(try fixture.member("a"), "x")
        #expect(try seed(fixture, "demo", .existing) == .accepted(epoch: fixture.epoch, rev: 1))
        #expect(try fixture.command("HGET", fixture.keys.head, "seeded").integer ?? 0 > 0)
        #expect(try fixture.headRev == 1)
        #expect(try seed(fixture, "none", .existing) == .absent)
        #expect(try fixture.command("EXISTS", "presence:{none}:head") == .integer(0))
        fixture.finish()
    }

    @Test func anOrphanLogIsLeftToTheOperator() throws {
        let fixture = try ClusterFixture()
        _ = try fixture.append(try fixture.member("a"), "x")
        _ = try fixture.command("DEL", fixture.keys.head)
        #expect(try seed(fixture, "demo", .empty) == .orphanLog)
        #expect(try fixture.command("EXISTS", fixture.keys.head) == .integer(0))
        fixture.finish()
    }

    @Test func anUnreachableRedisIsAnErrorNotAnOutcome() throws {
        let result = HistorySeed.seed(try RedisEndpoint(host: "127.0.0.1", port: 1), keys: try RedisKeys(namespace: "x"), mode: .empty,
                                      leaseMilliseconds: 4000, timeoutMilliseconds: 500)
        guard case .failure(.notSent) = result else { Issue.record("\(result)"); return }
    }
}
