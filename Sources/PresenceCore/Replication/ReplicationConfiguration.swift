/// How an engine takes part in a cluster (`Engine.Configuration.replication`).
public struct ReplicationConfiguration: Sendable, Equatable {
    /// This node's id in the logs (`name#incarnation`): the origin of its proposals, and what
    /// `takeover` and `dead` entries name.
    public var node: String
    /// Revisions a proposal's base may lie behind the head (`VersionWindow.capacity`). Every node
    /// of a cluster must use the same value: validation depends on it.
    public var windowCapacity: UInt64
    /// How many times an aborted plain write is evaluated again before it is answered
    /// `unavailable`. Held ops are re-proposed until they commit or are cancelled.
    public var maxReproposals: Int
    /// `g` reads the log's head first and answers once the replica has it (one Redis round trip;
    /// the read is then linearizable). Off: `g` is served from the replica as it is.
    public var readBarrier: Bool
    /// How long a committed run of held ops is remembered, so that a session adopted or taken over
    /// afterwards (its record was not dropped yet) is not run twice.
    public var recentRunsMilliseconds: Int64
    /// How long a REST request or stream waits for its namespace to be loaded on this node (it
    /// follows the namespace for it) before it is answered `unavailable`.
    public var loadWaitMilliseconds: Int64
    /// How long a namespace that holds data stays followed once nothing on this node uses it (no
    /// connection, stream, request, held ops or step in flight): then its replica is dropped from
    /// memory and the node stops following its log (the shell then releases its lease), until a
    /// client names it again and it is loaded afresh (snapshot, then the log). nil: followed for
    /// as long as the node runs. A namespace without data is let go at once, as on one node.
    public var unfollowIdleMilliseconds: Int64?

    public init(node: String, windowCapacity: UInt64 = VersionWindow.defaultCapacity, maxReproposals: Int = 3,
                readBarrier: Bool = false, recentRunsMilliseconds: Int64 = 60_000, loadWaitMilliseconds: Int64 = 15_000,
                unfollowIdleMilliseconds: Int64? = nil) {
        self.node = node
        self.unfollowIdleMilliseconds = unfollowIdleMilliseconds
        self.loadWaitMilliseconds = loadWaitMilliseconds
        self.windowCapacity = windowCapacity
        self.maxReproposals = maxReproposals
        self.readBarrier = readBarrier
        self.recentRunsMilliseconds = recentRunsMilliseconds
    }
}

/// A namespace's replica bookkeeping (replicated mode): its version window (whose head is the
/// last applied revision), whether it is loaded, and what waits for it.
final class ReplicaState {
    let window: VersionWindow
    /// Loaded and caught up with the log (`Engine.caughtUp`): requests are evaluated. Until then
    /// they wait.
    var serving = false
    /// Read barriers waiting for a revision, in arrival order.
    var barriers: [(rev: UInt64, step: UInt64)] = []
    /// Steps of this namespace waiting for the log or the session store: it stays in memory.
    var pendingSteps = 0
    /// Holds data and nothing here uses it since this time (`Engine+IdleReplicas`); nil: in use.
    var idleSince: Int64?

    init(window: VersionWindow) { self.window = window }

    var applied: UInt64 { window.head }
}

/// Sessions whose held ops committed recently (replicated mode), so that a record adopted or taken
/// over before its runner dropped it is dropped instead of run again.
struct RecentRuns {
    private var ranAt: [String: Int64] = [:]
    private var order: [(session: String, at: Int64)] = []
    private var head = 0

    mutating func note(_ session: String, at now: Int64) {
        ranAt[session] = now
        order.append((session, now))
    }

    func contains(_ session: String) -> Bool { ranAt[session] != nil }

    mutating func forget(before time: Int64) {
        while head < order.count, order[head].at < time {
            let (session, at) = order[head]
            if ranAt[session] == at { ranAt[session] = nil }
            head += 1
        }
        if head > 256, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
