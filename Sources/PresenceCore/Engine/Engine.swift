/// The presence database engine: a pure state machine. The shell feeds it connection events and
/// decoded requests with the current time; it answers with effects (`drainEffects`) for the shell
/// to perform, in order. It reads no clock and touches no socket, so tests drive it with a manual
/// clock and fake connections.
public final class Engine {
    public struct Configuration: Sendable {
        /// The database used when a client sends an empty or missing `ns`.
        public var defaultNamespace: String
        /// How long a finished connection's onDisconnect ops are held before they run (ms).
        /// 0 runs them at once, as Firebase does.
        public var disconnectGraceMilliseconds: Int64
        /// SHA-1, for the data hash of transactions and ETags (§8.4). The core has no crypto of its
        /// own; without it, transactions answer `not_supported`.
        public var hashDigest: (@Sendable ([UInt8]) -> [UInt8])?
        /// "Who is online now", served at its location; nil turns it off.
        public var onlineIndex: OnlineIndexConfiguration?
        /// What one connection may hold and how big one read may be (`EngineLimits`).
        public var limits: EngineLimits
        /// One node of a cluster sharing each namespace through a log (docs/scaling.md); nil
        /// (the default) is the single node, which commits every change at once.
        public var replication: ReplicationConfiguration?
        public init(defaultNamespace: String = "default", disconnectGraceMilliseconds: Int64 = 0,
                    hashDigest: (@Sendable ([UInt8]) -> [UInt8])? = nil,
                    onlineIndex: OnlineIndexConfiguration? = .default, limits: EngineLimits = .default,
                    replication: ReplicationConfiguration? = nil) {
            self.defaultNamespace = defaultNamespace
            self.disconnectGraceMilliseconds = disconnectGraceMilliseconds
            self.hashDigest = hashDigest
            self.onlineIndex = onlineIndex
            self.limits = limits
            self.replication = replication
        }
    }

    public let configuration: Configuration
    /// Replaced on SIGHUP (rotated keys, secret or admin credential); tokens already accepted stay.
    var verifier: any TokenVerifier
    var defaultPolicy: any AccessPolicy
    let makeSessionID: () -> String

    var connections: [ConnectionID: Connection] = [:]
    var sessions: [String: ConnectionID] = [:]
    var namespaces: [String: Namespace] = [:]
    /// onDisconnect ops in their grace window, by the session that registered them.
    var held = HeldTable()
    /// The earliest token expiry scheduled (stale-early at worst); see `tick`.
    var nextTokenExpiry: Int64?
    /// Changes not yet taken by the shell for storage; nil when the engine is not persistent.
    var journal: StorageBatch?
    var journalSequence: UInt64 = 0
    /// Counts for operators' metrics.
    public internal(set) var counters = Counters()
    var effects: [Effect] = []
    /// The earliest time something may be due (token expiry; later the grace window). It may be
    /// stale-early, never late: `tick` recomputes it.
    var earliestDeadline: Int64?
    /// The limits file in force (nil: nothing is limited), the usage per user and limit, and the
    /// checks not yet taken by the shell for metrics and the event log.
    var limits: LimitSet?
    var limitUsage: [LimitUsageKey: LimitUsage] = [:]
    var limitEvents: [LimitEvent] = []
    /// Lines for the server's log (`takeNotices`).
    var notices: [String] = []
    /// Namespaces holding data or rules (`Engine+Namespaces`), and whether reaching the cap was logged.
    var namespacesHoldingData = 0
    var namespaceCapLogged = false
    /// Why storage cannot take changes now (a full disk), or nil: writes are refused meanwhile.
    var storageUnavailable: String?
    /// Replicated mode only (`Engine+Propose`, `Engine+Apply`): the request being evaluated, the
    /// steps waiting for the log or the session store, the connections waiting behind them, and
    /// what the cluster must do next.
    var proposal: ProposalContext?
    var pending: [UInt64: PendingStep] = [:]
    var pipelines: [ConnectionID: ConnectionPipeline] = [:]
    var lastSerial: UInt64 = 0
    var clusterEffects: [ClusterEffect] = []
    var recentRuns = RecentRuns()
    /// Sessions asked of the store with TAKEOVER, and the connection that asked.
    var awaitingTakeover: [String: ConnectionID] = [:]
    /// REST requests and streams answered through tickets (`Engine+Direct`).
    var direct = DirectRequests()
    /// Replicated namespaces holding data that nothing here uses, waiting to be let go.
    var idleReplicas = IdleReplicas()
    /// Hashes of locations asked for by transactions and ETags, while their values stay the same.
    var hashCache = HashCache()

    public init(
        configuration: Configuration = Configuration(),
        verifier: any TokenVerifier = EmulatorTokenVerifier(),
        policy: any AccessPolicy = OpenAccessPolicy(),
        makeSessionID: @escaping () -> String
    ) {
        self.configuration = configuration
        self.verifier = verifier
        self.defaultPolicy = policy
        self.makeSessionID = makeSessionID
    }

    /// Replaces the token verifier for credentials checked from now on (key rotation). Connections
    /// keep the credentials they were given until their token expires.
    public func setVerifier(_ verifier: any TokenVerifier) {
        self.verifier = verifier
    }

    /// Takes the effects produced since the last call.
    public func drainEffects() -> [Effect] {
        defer { effects.removeAll(keepingCapacity: true) }
        return effects
    }

    public var connectionCount: Int { connections.count }

    /// Replaces the rules of every namespace (and of namespaces created later).
    /// Replaces the default rules: those of every namespace that has no rules of its own.
    public func setPolicy(_ policy: any AccessPolicy, now: Int64) {
        defaultPolicy = policy
        for ns in namespaces.values where ns.ownRules == nil { ns.policy = policy }
        for id in connections.keys.sorted() where connections[id]!.listens.count > 0 { revokeUnreadableListens(id, now: now) }
    }

    /// Gives one namespace its own rules (REST `PUT /.settings/rules.json?ns=…`), atomically.
    public func setRules(_ rules: RuleSet, text: String, namespace name: String, now: Int64) {
        installRules(text, in: namespace(name), now: now, parsed: rules)
    }

    /// The rules in force for a namespace: the uploaded text if it has its own, else the default
    /// rules' document (nil when the default is not a rules document, e.g. the open policy).
    public func rules(namespace name: String) -> (document: JSON, text: String?)? {
        let ns = existingNamespace(name)
        if let own = ns.ownRules { return (own.document, ns.ownRulesText) }
        if let ruleSet = defaultPolicy as? RuleSet { return (ruleSet.document, nil) }
        if defaultPolicy is OpenAccessPolicy { return (RuleSet.allowAll.document, nil) }
        return nil
    }

    /// The §8.4 hash of a value (the transaction `h`, the REST ETag), or nil without a digest.
    public func hash(_ node: Node) -> String? {
        guard let digest = configuration.hashDigest else { return nil }
        return DataHash.hash(node, digest: digest)
    }

    /// `hash(node)` of the value at `path` of a namespace, kept until that value changes
    /// (`HashCache`): a location hashed again and again costs one hash while nobody writes there.
    public func hash(_ node: Node, at path: Path, namespace: String) -> String? {
        guard let digest = configuration.hashDigest else { return nil }
        let budget = configuration.limits.maxHashBytes
        return hashCache.hash(of: node, at: HashCache.Key(namespace: namespace, path: path),
                              size: { $0.estimatedJSONBytes(within: budget) }, compute: { DataHash.hash($0, digest: digest) })
    }

    /// How many hashes of locations were answered from `HashCache`, and how many were computed.
    public var hashCacheCounts: (hits: Int, misses: Int) { (hashCache.hits, hashCache.misses) }

    /// The stored value at `path` of a namespace (for REST reads, tests and operators).
    public func value(at path: Path, namespace name: String) -> Node {
        namespaces[name]?.root.node(at: path) ?? .null
    }

    func emit(_ outbound: Outbound, to id: ConnectionID) {
        effects.append(.send([id], outbound))
    }

    func reply(_ number: Int?, _ result: Result<ReplyData, EngineError>, to id: ConnectionID) {
        guard let number else { return }
        effects.append(.send([id], .reply(number: number, result: result)))
    }

    // MARK: Connection lifecycle

    /// A WebSocket connection was established. Sends the hello; with `lastSession` naming a live
    /// session, that older connection is closed first and its onDisconnect ops run (§7.4).
    /// Returns the new session id.
    @discardableResult
    public func open(_ id: ConnectionID, namespace: String?, lastSession: String?, host: String, now: Int64) -> String {
        if let lastSession, let previous = sessions[lastSession], previous != id {
            effects.append(.close(previous, code: .replaced, reason: "replaced by a newer connection of the same client"))
            disconnect(previous, now: now)
        }
        let name = (namespace?.isEmpty ?? true) ? configuration.defaultNamespace : namespace!
        self.namespace(name).connectionCount += 1
        var sessionID = makeSessionID()
        while sessions[sessionID] != nil || held[sessionID] != nil { sessionID = makeSessionID() }
        let connection = Connection(id: id, namespace: name, sessionID: sessionID)
        if let lastSession, held[lastSession] != nil {
            connection.resumedSession = lastSession
            // An anonymous client has no other proof than the session id itself.
            if held[lastSession]?.identity == Credentials.unauthenticated.identity {
                cancelHeld(session: lastSession, now: now)
            }
        } else if let lastSession, configuration.replication != nil, sessions[lastSession] == nil {
            // Replicated, the session may belong to another node (or to a dead one).
            requestTakeover(lastSession, by: connection, now: now)
        }
        connections[id] = connection
        sessions[sessionID] = id
        emit(.hello(timestamp: now, host: host, sessionID: sessionID), to: id)
        return sessionID
    }

    /// The connection ended for any reason (close frame, TCP close, liveness timeout, kick). Its
    /// listens are dropped and its onDisconnect ops run once, as one atomic write: at once with no
    /// grace window, else when the window ends unless the client came back in time.
    public func disconnect(_ id: ConnectionID, now: Int64) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        sessions.removeValue(forKey: connection.sessionID)
        pipelines.removeValue(forKey: id)
        let ns = namespace(connection.namespace)
        ns.connectionCount -= 1
        defer { releaseIfIdle(ns, now: now) }
        for listen in connection.listens.values { ns.listeners.remove(listen.listener) }
        guard !connection.onDisconnect.isEmpty else { return }
        if configuration.replication != nil { return holdReplicated(connection, now: now) }
        let grace = configuration.disconnectGraceMilliseconds
        if grace <= 0 {
            runOnDisconnect(connection.onDisconnect, in: ns, timestamp: now, now: now)
            record(.removeSession(sessionID: connection.sessionID))
            return
        }
        recordHeld(hold(connection, now: now, grace: grace))
        scheduleDeadline(now + grace)
    }

    /// A control ping (`{"t":"c","d":{"t":"p"}}`).
    public func ping(_ id: ConnectionID) {
        guard connections[id] != nil else { return }
        emit(.pong, to: id)
    }

    // MARK: Requests

    /// Executes one request. Requests of a connection must be handled in the order received.
    /// Replicated, a request that must go through the log (or the session store) is answered
    /// when it is applied, and the connection's later requests wait behind it (`Engine+Propose`).
    public func handle(_ request: NumberedRequest, from id: ConnectionID, now: Int64) {
        guard connections[id] != nil else { return }
        if configuration.replication != nil { return handleReplicated(request, from: id, now: now) }
        execute(request, from: id, now: now)
    }

    /// One request, evaluated now. A write answered later (replicated) replies nothing here.
    func execute(_ request: NumberedRequest, from id: ConnectionID, now: Int64) {
        let number = request.number
        switch request.request {
        case .stats(let sdk):
            if let sdk { connections[id]?.sdk = sdk }
            reply(number, .success(.empty), to: id)
        case .appCheck, .unappCheck:
            reply(number, .success(.empty), to: id)
        case let .auth(credential, authVariable, noAuth):
            authenticate(id, number: number, credential: credential, authVariable: authVariable, noAuth: noAuth, now: now)
        case .unauth:
            let previous = connections[id]?.credentials
            connections[id]?.credentials = .unauthenticated
            reply(number, .success(.empty), to: id)
            if previous != .unauthenticated { revokeUnreadableListens(id, now: now, authChanged: true) }
        case let .listen(path, query, tag):
            listen(id, number: number, path: path, query: query, tag: tag, now: now)
        case let .unlisten(path, query, tag):
            unlisten(id, path: path, query: query, tag: tag)
            reply(number, .success(.empty), to: id)
        case let .get(path, query):
            get(id, number: number, path: path, query: query, now: now)
        case let .put(path, data, hash):
            if let result = put(id, path: path, data: data, hash: hash, now: now) { reply(number, result.map { .empty }, to: id) }
        case let .merge(path, children):
            if let result = merge(id, path: path, children: children, now: now) { reply(number, result.map { .empty }, to: id) }
        case let .onDisconnectPut(path, data):
            let updates = [Request.Update(path: .root, value: data)]
            if let result = registerOnDisconnect(id, path: path, updates: updates, isMerge: false, now: now) {
                reply(number, result.map { .empty }, to: id)
            }
        case let .onDisconnectMerge(path, children):
            if let result = registerOnDisconnect(id, path: path, updates: children, isMerge: true, now: now) {
                reply(number, result.map { .empty }, to: id)
            }
        case let .onDisconnectCancel(path):
            if cancelOnDisconnect(id, path: path) { reply(number, .success(.empty), to: id) }
        }
    }

    func authenticate(_ id: ConnectionID, number: Int?, credential: String, authVariable: JSON?, noAuth: Bool, now: Int64) {
        switch verifier.verify(credential, now: now) {
        case .success(var credentials):
            // The admin may act as another auth (the Admin SDK's databaseAuthVariableOverride).
            if credentials == .admin {
                if noAuth {
                    credentials = .unauthenticated
                } else if let authVariable, case .object = authVariable {
                    credentials = .user(auth: authVariable, expiresAt: nil)
                }
            }
            let previous = connections[id]?.credentials
            connections[id]?.credentials = credentials
            if case .user(_, let expiresAt?) = credentials { scheduleTokenExpiry(expiresAt) }
            if let resumed = connections[id]?.resumedSession, held[resumed]?.identity == credentials.identity {
                cancelHeld(session: resumed, now: now)
            }
            let expires = credentials.rulesAuth?["token"]?["exp"] ?? .null
            let body: JSON = .object([("auth", credentials.rulesAuth ?? .null), ("expires", expires)])
            reply(number, .success(.json(body)), to: id)
            // The same identity again (a client re-sending its token): nothing it may read changed.
            if previous != credentials { revokeUnreadableListens(id, now: now, authChanged: true) }
        case .failure(let error):
            counters.authFailures += 1
            reply(number, .failure(EngineError(error)), to: id)
        }
    }
}
