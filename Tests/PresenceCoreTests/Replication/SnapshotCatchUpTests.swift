import Testing
import PresenceCore
import PresenceTesting

/// A node that starts from a snapshot (through its bytes, `FakeLog`) and the log after it ends
/// with the replica of a node that applied the whole log, whatever the interleaving.
@Suite struct SnapshotCatchUpTests {
    /// Two nodes write plain values and transactions at random; a third joins from one node's
    /// snapshot at a random moment, with a small version window, so that entries proposed before
    /// the snapshot and ordered after it (some out of the window) are judged on the newcomer too.
    @Test(arguments: 1...24 as ClosedRange<UInt64>)
    func snapshotPlusTailEqualsAFullReplay(seed: UInt64) {
        let log = FakeLog(nodes: 3, windowCapacity: 24)
        var random = SeededRandom(seed: seed)
        var counter = CounterClients(log, on: [0, 1])
        let writers = [log.connect(to: 0), log.connect(to: 1)]
        log.settle()
        log.nodes[2].snapshotSource = log.nodes[random.int(2)]
        let joinAfter = 10 + random.int(150)
        var requests = 0
        var steps = 0
        while counter.done.reduce(0, +) < 120 || requests < 200, steps < 500_000 {
            steps += 1
            if requests < 200, random.chance(0.3) {
                requests += 1
                let path = ["a", "b", "a/x", "b/y", "c", "counter2"][random.int(6)]
                let value = random.chance(0.2) ? "null" : "\(random.int(1000))"
                log.request(1000 + requests, "p", "{\"p\":\"/\(path)\",\"d\":\(value)}", from: writers[random.int(2)])
            }
            if counter.clients.count == 2, log.head() >= joinAfter { counter.add(log.connect(to: 2)) }
            counter.step(&random, each: 40, weights: [3, 1, 2])
        }
        log.settle()
        #expect(log.applyErrors.isEmpty, "\(log.applyErrors)")
        #expect((log.nodes[2].snapshotLoadedAt ?? 0) > 0)
        let referee = log.referee().tree
        for index in 0..<3 { #expect(log.tree(index) == referee) }
        #expect(counter.done == [40, 40, 40])
        #expect(log.tree(2).node(at: try! Path("counter")).leafValue == .number(120))
    }

    static func roundTrip(_ snapshot: ReplicaSnapshot) throws -> ReplicaSnapshot {
        let chunks = try snapshot.encodedChunks(token: "x", chunkBytes: 64)
        return try ReplicaSnapshot(decodingChunks: Dictionary(uniqueKeysWithValues: chunks.map { ($0.id, $0.data) }),
                                   namespace: snapshot.namespace, rev: snapshot.rev)
    }

    /// A replica still catching up may load a newer snapshot over what it applied (the log was
    /// trimmed past it while it loaded), never an older one, and never once it serves.
    @Test func aReplicaCatchingUpLoadsNewerSnapshotsOnly() throws {
        let log = FakeLog(nodes: 1)
        let writer = log.connect(to: 0)
        log.settle()
        func write(_ n: Int) {
            log.request(n, "p", "{\"p\":\"/k\(n % 5)\",\"d\":\(n)}", from: writer)
            log.settle()
        }
        for n in 1...5 { write(n) }
        let older = try Self.roundTrip(#require(log.nodes[0].engine.replicaSnapshot(namespace: "test")))
        for n in 6...12 { write(n) }
        let newer = try Self.roundTrip(#require(log.nodes[0].engine.replicaSnapshot(namespace: "test")))
        #expect(older.rev == 5 && newer.rev == 12)

        let joiner = Engine(configuration: .init(replication: ReplicationConfiguration(node: "z#1")), policy: OpenAccessPolicy(),
                            makeSessionID: { "z#1-s" })
        joiner.preload(namespace: "test")
        #expect(joiner.drainClusterEffects() == [.follow(namespace: "test")])
        #expect(joiner.appliedRevision(namespace: "test") == 0)
        try joiner.loadReplica(older, now: 0)
        try joiner.apply(log.logs["test"]![5], namespace: "test", now: 0) // revision 6
        #expect(joiner.appliedRevision(namespace: "test") == 6)
        #expect(throws: ApplyError.self) { try joiner.loadReplica(older, now: 0) }
        try joiner.loadReplica(newer, now: 0)
        #expect(joiner.appliedRevision(namespace: "test") == 12)
        joiner.caughtUp(namespace: "test", now: 0)
        #expect(joiner.value(at: .root, namespace: "test") == log.tree(0))
        #expect(throws: ApplyError.self) { try joiner.loadReplica(newer, now: 0) }
    }
}
