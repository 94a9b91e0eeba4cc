import Testing
import PresenceCore

/// The pieces together, as the engine integration will use them: proposals evaluated on a replica
/// at `base`, shipped as encoded `LogEntry`s, validated and applied in revision order.
@Suite("Validation pipeline")
struct ValidationPipelineTests {
    /// One replica: a tree and its version window, applying entries in order.
    final class Replica {
        var tree: Node
        let window = VersionWindow(capacity: 100)
        var committed: [UInt64] = []

        init(_ tree: Node) { self.tree = tree }

        func apply(_ bytes: [UInt8], rev: UInt64) throws {
            let entry = try LogEntry(decoding: bytes)
            guard window.validate(entry.readSet, base: entry.base) == .valid else {
                try window.record([], rev: rev)
                return
            }
            var written: [WrittenPath] = []
            for write in entry.writes {
                written.append(WrittenPath(writing: write.value, at: write.path, over: tree))
                tree.set(write.value, at: write.path)
            }
            try window.record(written + entry.virtualWrites, rev: rev)
            committed.append(rev)
        }
    }

    static var rules: RuleSet {
        get throws { try RuleSet.load(text: rulesText, source: "pipeline") }
    }

    static let rulesText = #"""
    {"rules": {
      "banned": {".write": "auth.uid == 'admin'"},
      "groups": {"$g": {"$uid": {".write": "auth.uid == $uid && !root.child('banned').child($uid).exists()"}}},
      "counter": {".write": true},
      "users": {"$uid": {"presence": {".write": "auth.uid == $uid"}}}
    }}
    """#

    /// Evaluates `writes` on `replica` (at its head) as `uid` and encodes the proposal.
    static func propose(_ writes: [(String, JSON)], as uid: String, on replica: Replica,
                        hashedAt transaction: String? = nil) throws -> [UInt8]? {
        var reads = ReadSet()
        let resolved = try writes.map { (try Path($0.0), try Node(json: $0.1)) }
        let policy: any AccessPolicy = try rules
        guard policy.allowsWrite(resolved, root: replica.tree, auth: ["uid": .string(uid)], now: 0, recording: &reads) else { return nil }
        if let transaction { reads.insert(try Path(transaction), .subtree) }
        return try LogEntry(namespace: "demo", kind: .write, base: replica.window.head, readSet: reads,
                            writes: resolved.map { LogEntry.Write(path: $0.0, value: $0.1) }, identity: "uid:\(uid)",
                            onAbort: transaction == nil ? .repropose : .dataStale).encoded()
    }

    @Test func aJoinEvaluatedBeforeARacingBanAborts() throws {
        let replicas = [Replica(.null), Replica(.null)]
        // Both proposals are evaluated at revision 0, on two nodes.
        let ban = try #require(try Self.propose([("/banned/alice", true)], as: "admin", on: replicas[0]))
        let join = try #require(try Self.propose([("/groups/g/alice", true)], as: "alice", on: replicas[1]))
        // The log orders the ban first.
        for replica in replicas {
            try replica.apply(ban, rev: 1)
            try replica.apply(join, rev: 2)
        }
        for replica in replicas {
            #expect(replica.committed == [1])
            #expect(replica.tree.node(at: try Path("/groups/g/alice")).isNull)
        }
        // Re-evaluated on the newer replica, the join is denied.
        #expect(try Self.propose([("/groups/g/alice", true)], as: "alice", on: replicas[1]) == nil)
    }

    @Test func unrelatedAndBlindWritesCommitInLogOrder() throws {
        let replica = Replica(try Node(json: ["groups": ["g": ["bob": true]]]))
        let join = try #require(try Self.propose([("/groups/g/alice", true)], as: "alice", on: replica))
        let presence = try #require(try Self.propose([("/users/bob/presence", ["online": true])], as: "bob", on: replica))
        let other = try #require(try Self.propose([("/users/bob/presence", ["online": false])], as: "bob", on: replica))
        try replica.apply(presence, rev: 1)
        try replica.apply(other, rev: 2)   // blind: the last writer wins
        try replica.apply(join, rev: 3)    // read /banned/alice only; nothing wrote it
        #expect(replica.committed == [1, 2, 3])
        #expect(replica.tree.node(at: try Path("/users/bob/presence/online")) == Node(.bool(false)))
    }

    @Test func concurrentTransactionsOnOneCounterCommitOnlyOnce() throws {
        let replica = Replica(try Node(json: ["counter": 5]))
        // Three clients read 5 and each propose 6 (a transaction reads what it replaces).
        let proposals = try (0..<3).map { _ in
            try #require(try Self.propose([("/counter", 6)], as: "u", on: replica, hashedAt: "/counter"))
        }
        for (index, bytes) in proposals.enumerated() { try replica.apply(bytes, rev: UInt64(index + 1)) }
        #expect(replica.committed == [1])
        #expect(try LogEntry(decoding: proposals[1]).onAbort == .dataStale)
        #expect(replica.tree.node(at: try Path("/counter")) == Node(.number(6)))
    }
}
