import Logging
import PresenceCore
import PresenceLoop
import PresenceRedis

/// The shell's side of a replicated engine (docs/scaling.md, "The replicated engine"): performs
/// each `ClusterEffect` on Redis and gives the answer back to the engine, keeps this node's lease
/// in every namespace it joined (beats, reaping, fencing, a leave on a graceful stop), and tails
/// the log of every followed namespace into `Engine.apply`.
///
/// Two Redis connections on the server's loop: one for commands (in order, so a namespace's
/// effects reach Redis in the order the engine produced them) and one for the tail's blocking
/// reads. Everything runs on the loop thread; every Redis completion is a libuv callback, so it
/// goes through `runtime.dispatch` (lws timers and writes scheduled there are armed).
final class ClusterLink {
    let settings: ClusterSettings
    let engine: Engine
    let runtime: LoopRuntime
    let logger: Logger
    let commands: RedisConnection
    let tailConnection: RedisConnection
    let tail: RedisLogTail
    let clock = RedisMonotonicClock()
    /// Runs the engine's step after an answer (set by `EngineSteps`).
    var runSteps: () -> Void = {}
    var members: [String: ClusterNamespace] = [:]
    /// Proposals whose outcome is unknown and whose log read failed: read again at the next beat.
    var unresolved: [(Proposal, after: UInt64)] = []
    /// Work retried at the next beat (a failed head read, create or join): never in a tight loop.
    var retries: [() -> Void] = []
    private(set) var connectedSince: Int64?
    private(set) var fenced = false
    let metrics = ClusterMetrics()
    /// `--cluster-state`: the history of each namespace served, checked before CREATE.
    let history: ClusterHistory?
    /// Namespaces refused because Redis lost their history (ClusterRefusals.swift).
    let refusals = NamespaceRefusals()
    /// The operators' node list and forwarded kicks (ClusterDirectory.swift).
    let directory: ClusterDirectory
    /// Operators' asks to every node and their answers, on a third connection (ClusterAsks.swift).
    let asking: ClusterAsks
    let asksConnection: RedisConnection
    /// For `/readyz`: connected to Redis, not fenced, and every `--preload` namespace caught up
    /// (`notReadyReason` says which is missing).
    var isReady: Bool { notReadyReason == nil }
    var isConnected: Bool { connectedSince != nil }
    /// `--preload` namespaces not caught up yet.
    var preloading: Set<String> = []
    var beatTimer: LoopTimer?
    var snapshotTimer: LoopTimer?
    /// Answers decided without Redis, given after the current step (never inside it).
    private var deferred: [() -> Void] = []
    private var deferredTimer: LoopTimer?
    /// Up or down, since when, and what operators were told (ClusterReachability.swift).
    var reachability: RedisReachability

    init(settings: ClusterSettings, engine: Engine, runtime: LoopRuntime, logger: Logger) {
        self.settings = settings
        self.engine = engine
        self.runtime = runtime
        self.logger = logger
        let name = "presence \(settings.identity.name)"
        commands = RedisConnection(loop: runtime.uvLoop, endpoint: settings.endpoint,
                                   options: .init(connectTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                  commandTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                  clientName: name))
        tailConnection = RedisConnection(loop: runtime.uvLoop, endpoint: settings.endpoint,
                                         options: .init(connectTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                        commandTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                        clientName: name + " tail"))
        tail = RedisLogTail(connection: tailConnection)
        history = settings.clusterStatePath.flatMap { try? ClusterHistory(path: $0) } // read once already by the settings
        directory = ClusterDirectory(connection: commands, nodeID: settings.nodeID)
        reachability = RedisReachability(address: settings.endpoint.description)
        asksConnection = RedisConnection(loop: runtime.uvLoop, endpoint: settings.endpoint,
                                         options: .init(connectTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                        commandTimeoutMilliseconds: settings.redisTimeoutMilliseconds,
                                                        clientName: name + " asks"))
        asking = ClusterAsks(connection: commands, reader: asksConnection, nodeID: settings.nodeID)
    }

    /// Loop thread, once: connect, start beating, and close everything when the loop shuts down.
    func start() {
        for script in [RedisScripts.create, RedisScripts.sequence, RedisScripts.join, RedisScripts.beat, RedisScripts.leave,
                       RedisScripts.reap, RedisScripts.release, RedisScripts.session, RedisScripts.takeover, RedisScripts.nodes, RedisScripts.nodesLeave,
                       RedisScripts.snapshotBegin, RedisScripts.snapshotChunks, RedisScripts.snapshotDone] {
            commands.register(script)
        }
        commands.onEvent = { [unowned self] event in runtime.dispatch { connectionEvent(event) } }
        tail.onEvent = { [unowned self] event in runtime.dispatch { tailEvent(event) } }
        commands.start()
        tailConnection.start()
        asking.asks.onAsk = { [unowned self] ask in runtime.dispatch { answerAsk(ask) } }
        asksConnection.start()
        asking.asks.start()
        let timer = runtime.makeTimer { [unowned self] in beatAll() }
        beatTimer = timer
        timer.schedule(afterMicroseconds: settings.beatMilliseconds * 1000)
        beatDirectory() // in the node list at once, not after a beat period
        deferredTimer = runtime.makeTimer { [unowned self] in
            let jobs = deferred
            deferred = []
            for job in jobs { job() }
        }
        let snapshots = runtime.makeTimer { [unowned self] in
            snapshotTick()
            snapshotTimer?.schedule(afterMicroseconds: settings.beatMilliseconds * 1000)
        }
        snapshotTimer = snapshots
        snapshots.schedule(afterMicroseconds: settings.beatMilliseconds * 1000)
        runtime.onShutdown { [unowned self] in close() }
        logger.info("cluster node \(settings.nodeID) on Redis \(settings.redisAddress)")
        preloading = Set(settings.preload)
        if !preloading.isEmpty {
            later { [unowned self] in
                for ns in settings.preload { engine.preload(namespace: ns) }
                runSteps()
            }
        }
    }

    // MARK: Effects

    /// Performs the engine's cluster effects, in order.
    func perform(_ effects: [ClusterEffect]) {
        for effect in effects {
            switch effect {
            case .follow(let ns): follow(ns)
            case .unfollow(let ns): unfollow(ns)
            case .propose(let proposal): whenJoined(proposal.namespace, effect) { propose(proposal, on: $0) }
            case .session(let command): whenJoined(command.namespace, effect) { perform(command, on: $0) }
            case let .readBarrier(ns, id): whenJoined(ns, effect) { readBarrier(id, on: $0) }
            case let .declaredDead(ns, rev):
                fence("the log of namespace \(ns) declared this node dead at revision \(rev)")
            }
        }
    }

    /// Gives an answer to the engine on the loop thread, then runs its step.
    func answer(_ body: (Int64) -> Void) {
        body(WallClock.nowMilliseconds())
        runSteps()
    }

    /// Runs `job` on the loop after the current step.
    func later(_ job: @escaping () -> Void) {
        deferred.append(job)
        if deferredTimer?.isScheduled == false { deferredTimer?.schedule(afterMicroseconds: 1) }
    }

    private func whenJoined(_ ns: String, _ effect: ClusterEffect, _ perform: (ClusterNamespace) -> Void) {
        guard let member = member(ns) else { return }
        if member.isJoined { return perform(member) }
        member.waiting.append(effect)
        rejoinIfReleased(member)
    }

    // MARK: Following

    private func follow(_ ns: String) {
        logger.debug("following the log of namespace \(ns)")
        guard let member = member(ns) else { return }
        if member.isJoined { return startFollowing(member) }
        member.wantsFollow = true
        rejoinIfReleased(member)
    }

    private func unfollow(_ ns: String) {
        logger.debug("no longer following the log of namespace \(ns)")
        guard let member = members[ns] else { return }
        member.wantsFollow = false
        member.generation += 1
        tail.unfollow(member.keys)
        if preloading.contains(ns) {
            // Released before it caught up (a client came and went): /readyz still waits for it.
            later { [unowned self] in
                engine.preload(namespace: ns)
                runSteps()
            }
        }
        if case .failed = member.phase { return }
        if member.isJoined { member.phase = .idle }
    }

    /// Reads the head, then tails from the first revision; `caughtUp` once the head is applied.
    func startFollowing(_ member: ClusterNamespace) {
        member.phase = .catchingUp(head: nil)
        member.generation += 1
        member.gaps = 0
        member.snapshots.started(at: clock.milliseconds())
        let generation = member.generation
        member.log.head { [unowned self] result in
            runtime.dispatch {
                guard member.generation == generation else { return } // released (or restarted) meanwhile
                switch result {
                case .success(let head?) where head.snapshot > 0:
                    loadSnapshot(member, head: head, generation: generation)
                case .success(let head?) where head.min > 1:
                    failFollowing(member, "its log was trimmed below revision \(head.min) and it has no snapshot")
                case .success(let head):
                    let rev = head?.rev ?? 0
                    member.phase = .catchingUp(head: rev)
                    tail.follow(member.keys, after: 0)
                    if rev == 0 { caughtUp(member) }
                case .failure(let error):
                    loadAttemptFailed(member, "reading its head", error) { [unowned self] in
                        if member.generation == generation { startFollowing(member) }
                    }
                }
            }
        }
    }

    func caughtUp(_ member: ClusterNamespace) {
        member.phase = .serving
        preloading.remove(member.name)
        answer { engine.caughtUp(namespace: member.name, now: $0) }
    }

    func failFollowing(_ member: ClusterNamespace, _ reason: String) {
        logger.critical("namespace \(member.name) cannot be served on this node: \(reason)")
        member.phase = .failed(reason)
        tail.unfollow(member.keys)
    }

    private func tailEvent(_ event: RedisLogTail.Event) {
        switch event {
        case let .entries(keys, entries):
            guard let member = members[keys.namespace] else { return }
            apply(entries, to: member)
        case let .gap(keys, expected, found):
            guard let member = members[keys.namespace], member.isApplying else { return }
            if case .catchingUp = member.phase {
                // Trimmed while this node was loading: start again from the newest snapshot.
                logger.notice("namespace \(member.name): revisions \(expected)..<\(found) were trimmed while catching up; loading the newest snapshot")
                return startFollowing(member)
            }
            // A read in flight when the namespace was followed again answers from the old
            // position: follow on from what is applied. Gaps in a row mean the log was trimmed.
            member.gaps += 1
            if member.gaps > 3 {
                // Trimmed behind a snapshot while this node lagged more than --log-keep: a replica
                // with listeners cannot jump; restart (as fencing does) and load the snapshot.
                fence("revisions \(expected)..<\(found) of namespace \(member.name) were trimmed from the log before this node applied them")
            } else {
                tail.follow(member.keys, after: engine.appliedRevision(namespace: member.name) ?? 0)
            }
        case .failed(let error):
            if !reachability.isDown { logger.warning("reading the logs failed: \(error)") }
        }
    }

    private func apply(_ entries: [RedisLogEntry], to member: ClusterNamespace) {
        let now = WallClock.nowMilliseconds()
        member.gaps = 0
        for entry in entries where member.isApplying {
            if let applied = engine.appliedRevision(namespace: member.name), entry.rev <= applied { continue }
            do {
                try engine.apply(entry, namespace: member.name, now: now)
            } catch {
                // Released by this very batch (a REST request answered, nothing else holds the
                // namespace): its `unfollow` comes with this step.
                if case .notFollowed = error { break }
                failFollowing(member, "revision \(entry.rev): \(error)")
                break
            }
            if case .catchingUp(let head?) = member.phase, entry.rev >= head {
                member.phase = .serving
                preloading.remove(member.name)
                engine.caughtUp(namespace: member.name, now: now)
            }
        }
        runSteps()
    }

    // MARK: Read barrier

    private func readBarrier(_ id: UInt64, on member: ClusterNamespace) {
        member.log.head { [unowned self] result in
            runtime.dispatch {
                let rev: UInt64? = switch result {
                case .success(let head): head?.rev ?? 0
                case .failure: nil
                }
                answer { engine.headRevision(id, rev: rev, now: $0) }
            }
        }
    }

    // MARK: Connection and shutdown

    private func connectionEvent(_ event: RedisConnection.Event) {
        switch event {
        case .connected:
            let now = clock.milliseconds()
            if let line = reachability.connected(at: now) { logger.notice("\(line)") }
            connectedSince = now
            for member in members.values { member.monitor?.connected(at: now) }
            // What waited for Redis (a node started without it: CREATE, JOIN) goes now, not at the next beat.
            if !retries.isEmpty { later { [unowned self] in runRetries() } }
        case let .failed(reason, retry), let .lost(reason, retry):
            if let line = reachability.failed(reason, retryInMilliseconds: retry, at: clock.milliseconds()) { logger.error("\(line)") }
            connectedSince = nil
            for member in members.values { member.monitor?.disconnected() }
        }
    }

    /// The node may no longer act (its lease is gone, or the log declared it dead): stop serving,
    /// so that it never acknowledges a write or runs ops another node now owns. A supervisor
    /// restarts it as a new incarnation.
    func fence(_ reason: String) {
        guard !fenced else { return }
        fenced = true
        logger.critical("fenced: \(reason); stopping (restart the node to rejoin as a new incarnation)")
        LWSServer.requestStop()
    }

    private func close() {
        tail.onEvent = nil
        tail.stop()
        commands.close()
        tailConnection.close()
        asking.asks.stop()
        asksConnection.close()
    }

    /// The member for `ns`, created (and joining) on first use; nil when the name cannot be a key.
    func member(_ ns: String) -> ClusterNamespace? {
        if let member = members[ns] { return member }
        let keys: RedisKeys
        do {
            keys = try RedisKeys(namespace: ns)
        } catch {
            // Only a name too long for a key; the WebSocket route closes such connections.
            logger.debug("namespace \(ns) cannot be replicated: \(error)")
            return nil
        }
        let member = ClusterNamespace(keys: keys, connection: commands)
        members[ns] = member
        join(member)
        return member
    }
}
