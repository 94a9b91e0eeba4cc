import PresenceCore
import PresenceRedis
import Testing
@testable import PresenceServer

/// A session record read back from Redis (TAKEOVER, REAP) is its last whole `put` with the
/// appended changes replayed in order: the same ops as the engine's queue after those changes.
@Suite struct ClusterSessionRecordTests {
    private func op(_ path: String, _ value: JSON) throws -> OnDisconnectOp {
        OnDisconnectOp(path: try Path(path), value: value, credentials: .admin)
    }

    private func bytes(_ json: JSON) -> [UInt8] { Array(JSONWriter.string(json).utf8) }

    @Test func aRecordIsItsPutWithTheChangesReplayed() throws {
        let base = try (0..<40).map { try op("/users/u\($0)/online", .bool(false)) }
        let stored = StoredSession(sessionID: "S", namespace: "demo", identity: "anonymous", ops: base)
        var queue = OnDisconnectQueue(restoring: base)
        let batches: [[OnDisconnectChange]] = [
            [.set(try op("/users/u40/online", .bool(false)))],
            [.cancel(try Path("/users/u3"))],
            [.set(try op("/users", .object([("u1", .null), ("u2", .string("x"))])))],
            [.cancel(try Path("/users/u1"))],
        ]
        for batch in batches { for change in batch { queue.apply(change) } }
        let record = SessionRecord(
            id: "S", owner: "a#1", state: .held, disconnectedAt: 10, runAt: 20, ops: bytes(StorageCoding.json(stored)),
            changes: batches.enumerated().map { bytes(StorageCoding.json(identity: "uid:alice\($0.offset)", changes: $0.element)) })
        let session = try ClusterLink.decode(record)
        #expect(session.ops == queue.ops)
        #expect(session.identity == "uid:alice3", "the latest change's identity")
        #expect(session.disconnectedAt == 10 && session.runAt == 20)
    }

    @Test func aRecordWithoutChangesIsItsPut() throws {
        let stored = StoredSession(sessionID: "S", namespace: "demo", identity: "uid:bob", ops: [try op("/a", .number(1))])
        let session = try ClusterLink.decode(SessionRecord(id: "S", owner: "a#1", state: .live, ops: bytes(StorageCoding.json(stored))))
        #expect(session == stored)
    }

    @Test func aMalformedChangeIsAnErrorNotATrap() throws {
        let stored = StoredSession(sessionID: "S", namespace: "demo", identity: "uid:bob", ops: [])
        for change in [[UInt8]("{".utf8), [UInt8]("{\"identity\":1}".utf8), [UInt8]("{\"identity\":\"x\",\"changes\":[{}]}".utf8)] {
            #expect(throws: (any Error).self) {
                try ClusterLink.decode(SessionRecord(id: "S", owner: "a#1", state: .live, ops: bytes(StorageCoding.json(stored)),
                                                     changes: [change]))
            }
        }
    }
}
