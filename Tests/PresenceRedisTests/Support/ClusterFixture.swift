import Testing
@testable import PresenceRedis

/// A Redis, a loop, one command connection with every script registered, and a namespace whose
/// log exists: what the script tests start from.
final class ClusterFixture {
    let server: RedisServer
    let loop = TestLoop()
    let redis: RedisConnection
    let keys: RedisKeys
    let epoch = NodeIdentity.randomEpoch()
    let log: RedisLog
    let leaseMilliseconds: Int64

    init(leaseMilliseconds: Int64 = 5000, namespace: String = "demo") throws {
        self.leaseMilliseconds = leaseMilliseconds
        server = try RedisServer()
        redis = RedisConnection(loop: loop.loop, endpoint: server.endpoint)
        for script in RedisScripts.all { redis.register(script) }
        redis.start()
        keys = try RedisKeys(namespace: namespace)
        log = RedisLog(connection: redis, keys: keys)
        let created = try loop.call { log.create(epoch: epoch, leaseMilliseconds: leaseMilliseconds, completion: $0) }
        #expect(created == .created(epoch: epoch))
    }

    /// A node joined to the namespace.
    func member(_ name: String) throws -> NodeLease {
        let lease = NodeLease(connection: redis, keys: keys, node: try NodeIdentity(name: name), epoch: epoch)
        let joined = try loop.call { lease.join(completion: $0) }
        guard case .joined = joined else { throw LoopTimedOut(what: "join of \(name): \(joined)") }
        return lease
    }

    func sessions(_ lease: NodeLease) -> RedisSessions { RedisSessions(member: lease) }

    func append(_ lease: NodeLease, _ payload: String, claim: RedisLog.SessionClaim = .none) throws -> RedisLog.Append {
        try loop.call { log.append(node: lease.node.id, epoch: epoch, payload: Array(payload.utf8), claim: claim, completion: $0) }
    }

    func beat(_ lease: NodeLease) throws -> NodeLease.Beat { try loop.call { lease.beat(completion: $0) } }

    func command(_ arguments: String...) throws -> RedisReply { try server.command(arguments) }

    func entries(after rev: UInt64 = 0) throws -> [RedisLogEntry] {
        try loop.call { log.range(after: rev, count: 10_000, completion: $0) }
    }

    var headRev: UInt64 { get throws { try loop.call { log.head(completion: $0) }?.rev ?? 0 } }

    /// Closes the connection and checks the loop ends with nothing left open.
    func finish() {
        redis.close()
        #expect(loop.destroy() == 0)
    }
}
