/// What a replicated engine asks of the cluster (the shell's Redis wiring, or `FakeLog` in tests),
/// taken with `Engine.drainClusterEffects()` after each engine call and performed in order on the
/// namespace's one command connection. Client messages and closes stay in `drainEffects()`.
///
/// docs/scaling.md ("The replicated engine") maps each case to its script and says which engine
/// input the answer goes to.
public enum ClusterEffect: Sendable, Equatable {
    /// Start following a namespace's log: `Engine.apply` every revision in order from the first,
    /// or `Engine.loadReplica` a snapshot and apply the revisions after it; then `Engine.caughtUp`
    /// once the head read at the start is applied. Requests on it wait until then.
    case follow(namespace: String)
    /// The namespace was released from memory (nothing holds it): stop tailing its log.
    case unfollow(namespace: String)
    /// Append to the namespace's log (SEQ: `RedisLog.append(node:epoch:payload:claim:)`). The
    /// proposer's reply waits until it applies the entry. A refusal or a proposal that never
    /// reached the log goes to `Engine.proposalFailed(origin, ...)`; an outcome that is unknown
    /// (timeout, lost connection) is resolved by reading the log, never reported as a failure
    /// while the entry might still be in it.
    case propose(Proposal)
    /// Change a session record this node owns (SESSION, TAKEOVER scripts).
    case session(SessionCommand)
    /// `g` with the read barrier on: read the namespace's head revision (`HGET head rev`) and
    /// give it to `Engine.headRevision(id, rev)`; the read is served once the replica has it.
    case readBarrier(namespace: String, id: UInt64)
    /// The log declared this node dead (a `dead` entry naming it): it may no longer act. The
    /// shell fences (closes every client, fails `/healthz`) and rejoins as a new incarnation.
    case declaredDead(namespace: String, rev: UInt64)
}

/// One step for the log: the encoded `LogEntry` and what SEQ must check besides the lease.
public struct Proposal: Sendable, Equatable {
    public var namespace: String
    /// `LogEntry.encoded()`: the stream entry's `e` field.
    public var payload: [UInt8]
    public var claim: SessionClaim
    /// Also inside the payload: the key to `proposalFailed` and to resolving unknown outcomes.
    public var origin: LogEntry.Origin

    public init(namespace: String, payload: [UInt8], claim: SessionClaim, origin: LogEntry.Origin) {
        self.namespace = namespace
        self.payload = payload
        self.claim = claim
        self.origin = origin
    }
}

/// Which session a proposal acts for. Only `own` is used: SEQ's `run` claim deletes the record
/// when the entry is appended, but validation may still abort the entry at apply, and the ops
/// would then be lost (a ghost). The owner drops the record after the run commits instead.
public enum SessionClaim: Sendable, Equatable {
    case none
    /// SEQ checks that this node owns the session (`RedisLog.SessionClaim.own`).
    case own(String)
}

/// A change to one session record in the store (`RedisSessions`), by its owner.
public struct SessionCommand: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// SESSION `put`: the live session's ops, whole (record live, owned by this node).
        case put(StoredSession)
        /// Append changes to the record's ops, state unchanged: what a connection holding more
        /// than 32 ops sends instead of the whole list, so the n-th op costs O(1) in Redis too.
        /// Needs a SESSION op the scripts do not have yet (docs/scaling.md).
        case change(identity: String, changes: [OnDisconnectChange])
        /// SESSION `hold`: the connection ended; the ops run at `runAt` with timestamps at
        /// `disconnectedAt` unless the user comes back first.
        case hold(disconnectedAt: Int64, runAt: Int64)
        /// SESSION `drop`: the ops are gone (cancelled, superseded, or run and committed).
        case drop
        /// TAKEOVER: a connection opened here with `ls=<session>`; the answer goes to
        /// `Engine.takeoverResolved`.
        case takeover(now: Int64, graceMilliseconds: Int64)
    }

    public var namespace: String
    public var session: String
    public var action: Action
    /// When not nil, a client's reply waits for the answer: give it to
    /// `Engine.sessionCommandDone(reply, ...)`. Without it the answer only matters to the logs.
    public var reply: UInt64?

    public init(namespace: String, session: String, action: Action, reply: UInt64? = nil) {
        self.namespace = namespace
        self.session = session
        self.action = action
        self.reply = reply
    }
}

/// One revision of a namespace's log as the engine applies it (`Engine.apply`). `PresenceRedis`
/// parses it from the stream (`RedisLogEntry` is this type): stream ID `<rev>-0`, fields `k`
/// (kind), `n` (node), `t` (time) and the kind's own.
public struct LogRevision: Sendable, Equatable {
    public enum Body: Sendable, Equatable {
        /// `p`: a step proposed by `node` (field `e`: an encoded `LogEntry`).
        case proposal([UInt8])
        /// `dead`: `node` (a reaper, or a new incarnation of the same name) declared `deadNode`
        /// dead; it had last beaten at `lastBeat` (Redis ms).
        case nodeDead(deadNode: String, lastBeat: Int64)
        /// `leave`: `node` stopped gracefully; its live sessions count as disconnected at `at`.
        case nodeLeft(at: Int64)
        /// `takeover`: `node` took session `session` over from `from`, which closes that
        /// connection (4001) without running its ops.
        case takeover(session: String, from: String)
        /// A kind this version does not know (a newer node wrote it): stop applying, do not skip.
        case unknown(kind: String)
    }

    public var rev: UInt64
    /// The node that appended it.
    public var node: String
    /// Redis time when it was appended (ms).
    public var time: Int64
    public var body: Body

    public init(rev: UInt64, node: String, time: Int64, body: Body) {
        self.rev = rev
        self.node = node
        self.time = time
        self.body = body
    }
}

/// Why `Engine.apply` could not apply a revision. The namespace's replica is unchanged; the shell
/// must not skip the revision.
public enum ApplyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not the next revision (`expected`): a gap or a repeat in what the shell delivered.
    case outOfOrder(expected: UInt64, got: UInt64)
    /// Written by a newer node (a format version or kind this one does not read): stop applying
    /// this namespace and upgrade; never skip it.
    case unsupported(String)
    /// The entry's base lies before this replica's window history (it started from a snapshot
    /// without the window): other nodes can judge it, this one cannot. Load the window history.
    case missingHistory(rev: UInt64, base: UInt64)
    /// The namespace is not followed (no `follow` effect was performed for it, or it was released).
    case notFollowed(String)
    /// A snapshot that cannot be loaded (its history does not fit its revision), or one offered
    /// after the replica started serving.
    case invalidSnapshot(String)

    public var description: String {
        switch self {
        case let .outOfOrder(expected, got): return "log revision \(got) delivered where \(expected) was expected"
        case .unsupported(let reason): return "cannot apply the log: \(reason); upgrade this node"
        case let .missingHistory(rev, base): return "revision \(rev) was proposed at base \(base), before this replica's window history"
        case .notFollowed(let namespace): return "namespace \(namespace) is not followed"
        case .invalidSnapshot(let reason): return "cannot load the snapshot: \(reason)"
        }
    }
}

/// Why a proposal did not reach the log (`Engine.proposalFailed`).
public enum ProposalFailure: Sendable, Equatable {
    /// Certainly not appended: never sent, `EPOCH`, `FENCED`, or absent from the log when an
    /// unknown outcome was resolved. The client's request is answered `unavailable`.
    case notAppended(String)
    /// SEQ's claim was refused: the session belongs to another node now.
    case notOwner
}

/// The store's answer to a `SessionCommand` the engine waits for.
public enum SessionCommandResult: Sendable, Equatable {
    case done
    /// `ABSENT`, `NOT_OWNER`, `EPOCH`, `FENCED` or a transport failure: the client is answered
    /// `unavailable` (its ops may not be stored).
    case failed(String)
}

/// The answer to a TAKEOVER (`Engine.takeoverResolved`).
public enum TakeoverResult: Sendable, Equatable {
    /// `TAKEN` or `OWNED`: the session is this node's now, held with these ops and times
    /// (`disconnectedAt`, `runAt` set).
    case held(StoredSession)
    /// `ABSENT`: its ops already ran, or it never had any.
    case absent
    /// `EPOCH`, `FENCED` or a transport failure: nothing moved.
    case failed(String)
}
