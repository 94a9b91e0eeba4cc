/// One step a node proposes through a namespace's log: the payload (`e`) of a `p` stream entry
/// (`RedisLogEntry.Body.proposal`). Every node, the proposer included, decodes it and applies it
/// at its revision: it validates `readSet` against the revisions after `base`
/// (`VersionWindow.validate`), then either applies `writes` and `limitUsage` exactly as they are
/// here, or aborts the entry, on every node alike.
///
/// Steps that scripts append themselves (`dead`, `leave`, `takeover`: `RedisLogEntry.Body`) are
/// not entries of this type; they carry their own fields and write no data.
///
/// The encoding is JSON (`LogEntry+Coding.swift`), versioned by `formatVersion`.
public struct LogEntry: Sendable, Equatable {
    public static let formatVersion = 1

    public enum Kind: Sendable, Equatable {
        /// A client's write (`p`, `m`, REST `PUT`/`PATCH`/`DELETE`).
        case write
        /// The onDisconnect ops of a held session, run by its owner: the ops that passed their
        /// rules, as writes. Appended with SEQ's `own` claim on the session; the owner drops the
        /// record once it commits (`SessionClaim`).
        case runHeld(session: String)
        /// A new rules document for the namespace (its source text); nil forgets it. Applied as a
        /// write of `VirtualPaths.rules`.
        case setRules(document: String?)
        /// Limit usage only (a limited read, an operator's reset).
        case limitUsage
    }

    /// What the proposer does when the entry is aborted.
    public enum OnAbort: Sendable, Equatable {
        /// Evaluate again on the newer replica and propose again (a plain write).
        case repropose
        /// Answer `datastale`: the client asked for this exact state (a `p` with `h`, REST `if-match`).
        case dataStale
    }

    /// Which request of which connection on which node proposed the entry, so that a proposer
    /// that lost its Redis connection can find out from the log whether its proposal was appended.
    public struct Origin: Sendable, Equatable, Hashable {
        public var node: String
        public var connection: UInt64
        /// Unique per connection (the connection's proposal counter, say), not reused.
        public var request: UInt64

        public init(node: String, connection: UInt64, request: UInt64) {
            self.node = node
            self.connection = connection
            self.request = request
        }
    }

    /// One resolved write, exactly as applied: `Node.set(value, at: path)` (server values already
    /// resolved with the proposer's one `now`; `.null` deletes).
    public struct Write: Sendable, Equatable {
        public var path: Path
        public var value: Node

        public init(path: Path, value: Node) {
            self.path = path
            self.value = value
        }
    }

    /// A user's new usage of one limit in this namespace; nil forgets it. Applied as a write of
    /// `VirtualPaths.limitUsage(limit:uid:)`.
    public struct LimitUsageChange: Sendable, Equatable {
        public var limit: String
        public var uid: String
        public var usage: LimitUsage?

        public init(limit: String, uid: String, usage: LimitUsage?) {
            self.limit = limit
            self.uid = uid
            self.usage = usage
        }

        public var versionPath: Path { VirtualPaths.limitUsage(limit: limit, uid: uid) }
    }

    public var namespace: String
    public var kind: Kind
    /// The replica revision the proposal was evaluated at.
    public var base: UInt64
    public var readSet: ReadSet
    /// In the order they apply.
    public var writes: [Write]
    public var limitUsage: [LimitUsageChange]
    /// The proposer's identity (`Credentials.identity`: `uid:<uid>`, `anonymous`, `admin`), for
    /// cancelling that identity's held ops at or below the written paths (`supersedeHeld`); nil
    /// when the step has no client behind it.
    public var identity: String?
    public var origin: Origin?
    /// The session of the connection that proposed it, if any: a write never supersedes its own
    /// session's held ops (it is that session's, applied after it ended, not a sign that the user
    /// came back), wherever those ops are held by then.
    public var session: String?
    public var onAbort: OnAbort

    public init(namespace: String, kind: Kind, base: UInt64, readSet: ReadSet = ReadSet(), writes: [Write] = [],
                limitUsage: [LimitUsageChange] = [], identity: String? = nil, origin: Origin? = nil,
                session: String? = nil, onAbort: OnAbort = .repropose) {
        self.namespace = namespace
        self.kind = kind
        self.base = base
        self.readSet = readSet
        self.writes = writes
        self.limitUsage = limitUsage
        self.identity = identity
        self.origin = origin
        self.session = session
        self.onAbort = onAbort
    }

    /// What the version window records when the entry commits, for the virtual state it changes
    /// (rules, limit usage). The data writes are recorded one by one as they are applied, with
    /// `WrittenPath(writing:at:over:)` on the tree before each.
    public var virtualWrites: [WrittenPath] {
        var paths: [WrittenPath] = []
        if case .setRules = kind { paths.append(WrittenPath(VirtualPaths.rules)) }
        for change in limitUsage { paths.append(WrittenPath(change.versionPath)) }
        return paths
    }
}
