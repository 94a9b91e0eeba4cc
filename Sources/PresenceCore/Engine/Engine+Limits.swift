/// Limited operations (the limits file): each read of a limited location is one use for the
/// signed-in user, checked and counted here with the engine's one clock; the user's standing is
/// readable at the status location without using anything.
extension Engine {
    /// Replaces the limits (start-up, SIGHUP). Stored usage is kept: the new numbers apply from the
    /// next check. nil turns limits off.
    public func setLimits(_ limits: LimitSet?) {
        self.limits = limits
    }

    public var limitSet: LimitSet? { limits }

    /// The checks since the last call, for metrics and the event log.
    public func takeLimitEvents() -> [LimitEvent] {
        defer { limitEvents.removeAll(keepingCapacity: true) }
        return limitEvents
    }

    /// Stored usage, for operators and tests.
    public func limitUsage(_ key: LimitUsageKey) -> LimitUsage? { limitUsage[key] }

    /// Every stored usage of one user, sorted (operators: "why can't she refresh?").
    public func limitUsages(uid: String) -> [(key: LimitUsageKey, usage: LimitUsage)] {
        limitUsage.filter { $0.key.uid == uid }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Forgets one user's usage of a limit (an operator's support action): the count is 0 and any
    /// cooldown ends now. Returns false when nothing was stored here. Replicated, the reset goes
    /// through the log and holds once it commits (`submitLimitReset` says when).
    @discardableResult
    public func resetLimitUsage(_ key: LimitUsageKey, now: Int64) -> Bool {
        let stored = limitUsage[key] != nil
        _ = submitLimitReset(key, now: now)
        return stored
    }

    /// `resetLimitUsage` with one API for both modes: a single node resets now (`.now`);
    /// replicated, the reset is a `limitUsage` entry that forgets the usage on every node at its
    /// revision, and the outcome (`.reset`) comes once it has committed on this node, so a read
    /// here right after the answer sees the reset (or `unavailable` when it could not be ordered).
    public func submitLimitReset(_ key: LimitUsageKey, now: Int64) -> DirectAnswer {
        let answer: DirectAnswer
        if configuration.replication != nil {
            answer = submit(.resetLimit(key), namespace: key.namespace, now: now)
        } else {
            guard limitUsage[key] != nil else { return .now(.reset(.success(false))) }
            store(.unused, for: key)
            answer = .now(.reset(.success(true)))
        }
        limitEvents.append(LimitEvent(at: now, namespace: key.namespace, limit: key.limit, tier: nil, uid: key.uid,
                                      outcome: .resetByOperator, currentUsage: 0, remainingCooldownMilliseconds: 0))
        return answer
    }

    /// The standing of `credentials` on the limit `name`, without using it (nil: no such limit).
    public func limitStatus(_ name: String, namespace: String, credentials: Credentials, now: Int64) -> FeatureLimitResult? {
        guard let limit = limits?.limit(named: name) else { return nil }
        let standing = self.standing(limit, credentials: credentials, in: existingNamespace(namespace), now: now)
        note(.checked, standing, now: now)
        return standing.result
    }

    /// What a read of `path` returns when it is the limits' status location (or below it): every
    /// limit's standing by name. nil when `path` is elsewhere. Reading it uses nothing and needs no
    /// rule, since it only tells the caller about themselves.
    func limitStatusValue(at path: Path, credentials: Credentials, in ns: Namespace, now: Int64) -> Node? {
        guard let limits, let relative = limits.statusLocation.relative(path) else { return nil }
        var children: [String: Node] = [:]
        for limit in limits.limits where relative.isRoot || relative.segments[0] == limit.name {
            let standing = standing(limit, credentials: credentials, in: ns, now: now)
            note(.checked, standing, now: now)
            children[limit.name] = (try? Node(json: standing.result.json)) ?? .null
        }
        return Node.branch(children, priority: nil).node(at: relative)
    }

    /// One use of the limit guarding `path`, if any: nil when permitted (and counted), else why it
    /// is refused. Call it after every other check of the read passed: a read that fails for
    /// another reason must use nothing.
    func useLimit(at path: Path, credentials: Credentials, in ns: Namespace, now: Int64) -> EngineError? {
        guard !credentials.isAdmin, let limit = limits?.limit(guarding: path) else { return nil }
        return use(limit, credentials: credentials, in: ns, now: now)
    }

    /// One use of every write limit a write to `paths` touches, all or nothing: when one refuses,
    /// none is counted. Call it after the rules allowed the write. A write while storage is
    /// unavailable, or one that would give data to one namespace more than the cap allows
    /// (`EngineLimits.maxNamespaces`), is refused first.
    func useWriteLimits(_ paths: [Path], credentials: Credentials, in ns: Namespace, now: Int64) -> EngineError? {
        if let refusal = storageRefusal() { return refusal }
        if !credentials.isAdmin, let refusal = namespaceCapRefusal(ns) { return refusal }
        guard !credentials.isAdmin, let touched = limits?.limits(guardingWritesTo: paths), !touched.isEmpty else { return nil }
        // Replicated, the usage goes into the write's entry: every node applies it with the write.
        proposal?.collectsLimitUsage = true
        defer { proposal?.collectsLimitUsage = false }
        // Check them all before counting any (a refusal must consume nothing).
        if touched.count > 1 {
            for limit in touched where !standing(limit, credentials: credentials, in: ns, now: now).result.canProceed {
                return use(limit, credentials: credentials, in: ns, now: now)
            }
        }
        for limit in touched {
            if let refusal = use(limit, credentials: credentials, in: ns, now: now) { return refusal }
        }
        return nil
    }

    /// Checks and, when permitted, counts one use of `limit`.
    func use(_ limit: LimitDefinition, credentials: Credentials, in ns: Namespace, now: Int64) -> EngineError? {
        var standing = standing(limit, credentials: credentials, in: ns, now: now)
        guard let tier = standing.tier else {
            note(.blockedNoTier, standing, now: now)
            return .permissionDenied
        }
        guard case .limited(let uses, let cooldown) = tier.allowance else {
            note(.bypassByTier, standing, now: now)
            return nil
        }
        guard let key = standing.key, standing.result.canProceed else {
            let result = standing.result
            note(result.remainingCooldownMilliseconds > 0 ? .blockedByCooldown : .blockedByLimit, standing, now: now)
            return Self.refusal(limit, uses: uses, remainingCooldown: result.remainingCooldownMilliseconds)
        }
        var usage = storedUsage(key)
        let startedCooldown = usage.consume(at: now, uses: uses, cooldown: cooldown)
        store(usage, for: key)
        standing.result = result(limit, tier: tier, usage: usage, now: now)
        note(.performed, standing, now: now)
        if startedCooldown { note(.cooldownStarted, standing, now: now) }
        return nil
    }

    static func refusal(_ limit: LimitDefinition, uses: Int, remainingCooldown: Int64) -> EngineError {
        let spent = "\(limit.name): limit of \(uses) use\(uses == 1 ? "" : "s") reached"
        guard remainingCooldown > 0 else { return .rateLimited(spent, retryAfterMilliseconds: nil) }
        return .rateLimited(spent + "; try again in \(FeatureLimitResult.clock(milliseconds: remainingCooldown))",
                            retryAfterMilliseconds: remainingCooldown)
    }

    struct Standing {
        var namespace: String
        var limit: LimitDefinition
        var tier: LimitTier?
        var key: LimitUsageKey?
        var result: FeatureLimitResult
    }

    /// The user's standing now. Brings their stored usage up to `now` first (a cooldown that ended
    /// resets the count exactly at its end), recording what changed.
    func standing(_ limit: LimitDefinition, credentials: Credentials, in ns: Namespace, now: Int64) -> Standing {
        let tier: LimitTier?
        if let context = proposal, context.collectsLimitUsage {
            // Replicated: the tier may read data; a change there ordered first aborts the write.
            tier = limit.tier(auth: credentials.rulesAuth, root: ns.root, now: now, recording: &context.reads)
        } else {
            tier = limit.tier(auth: credentials.rulesAuth, root: ns.root, now: now)
        }
        let uid = credentials.uid
        let key = uid.map { LimitUsageKey(namespace: ns.name, limit: limit.name, uid: $0) }
        var usage = key.map(storedUsage) ?? .unused
        /// No tier applies: nothing is permitted.
        func refused(key: LimitUsageKey?, usage: Int) -> Standing {
            Standing(namespace: ns.name, limit: limit, tier: nil, key: key, result: FeatureLimitResult(
                limitName: limit.name, location: limit.location, tier: nil, unlimited: false, canProceed: false,
                showPopup: false, remainingCooldownMilliseconds: 0, currentUsage: usage, limit: nil, cooldownMilliseconds: nil))
        }
        guard let tier else { return refused(key: key, usage: usage.count) }
        if case .limited(let uses, let cooldown) = tier.allowance {
            // Counting needs someone to count for: a limited tier without a uid allows nothing.
            guard let key else { return refused(key: nil, usage: 0) }
            let transitions = usage.advance(to: now, uses: uses, cooldown: cooldown)
            if !transitions.isEmpty {
                store(usage, for: key)
                for transition in transitions {
                    let partial = Standing(namespace: ns.name, limit: limit, tier: tier, key: key, result: result(limit, tier: tier, usage: usage, now: now))
                    switch transition {
                    case .cooldownCompleted(_, let endedAt): note(.cooldownCompleted, partial, now: endedAt)
                    case .cooldownStarted(let at): note(.cooldownStarted, partial, now: at)
                    case .cooldownCancelled: break
                    }
                }
            }
        }
        return Standing(namespace: ns.name, limit: limit, tier: tier, key: key, result: result(limit, tier: tier, usage: usage, now: now))
    }

    func result(_ limit: LimitDefinition, tier: LimitTier, usage: LimitUsage, now: Int64) -> FeatureLimitResult {
        switch tier.allowance {
        case .unlimited:
            return FeatureLimitResult(
                limitName: limit.name, location: limit.location, tier: tier.name, unlimited: true, canProceed: true,
                showPopup: false, remainingCooldownMilliseconds: 0, currentUsage: usage.count, limit: nil, cooldownMilliseconds: nil)
        case .limited(let uses, let cooldown):
            return FeatureLimitResult(
                limitName: limit.name, location: limit.location, tier: tier.name, unlimited: false,
                canProceed: usage.count < uses, showPopup: true,
                remainingCooldownMilliseconds: usage.remainingCooldown(at: now, cooldown: cooldown),
                currentUsage: usage.count, limit: uses, cooldownMilliseconds: cooldown)
        }
    }

    /// A user's usage of a limit; replicated, as the write being evaluated has changed it so far,
    /// recording the read (a concurrent use of the same limit ordered first aborts the write).
    func storedUsage(_ key: LimitUsageKey) -> LimitUsage {
        guard let context = proposal, context.collectsLimitUsage else { return limitUsage[key] ?? .unused }
        context.reads.insert(VirtualPaths.limitUsage(limit: key.limit, uid: key.uid), .subtree)
        if let change = context.limitChanges.last(where: { $0.limit == key.limit && $0.uid == key.uid }) {
            return change.usage ?? .unused
        }
        return limitUsage[key] ?? .unused
    }

    func store(_ usage: LimitUsage, for key: LimitUsageKey) {
        if let context = proposal, context.collectsLimitUsage {
            context.limitChanges.removeAll { $0.limit == key.limit && $0.uid == key.uid }
            context.limitChanges.append(LogEntry.LimitUsageChange(limit: key.limit, uid: key.uid, usage: usage == .unused ? nil : usage))
            return
        }
        if usage == .unused { limitUsage.removeValue(forKey: key) } else { limitUsage[key] = usage }
        record(.setLimitUsage(key, usage == .unused ? nil : usage))
    }

    /// Replicated, events of a request that proposes wait until its entry commits.
    func note(_ outcome: LimitEvent.Outcome, _ standing: Standing, now: Int64) {
        let event = (LimitEvent(
            at: now, namespace: standing.namespace, limit: standing.limit.name, tier: standing.tier?.name,
            uid: standing.key?.uid, outcome: outcome, currentUsage: standing.result.currentUsage,
            remainingCooldownMilliseconds: standing.result.remainingCooldownMilliseconds))
        if let context = proposal { context.events.append(event) } else { limitEvents.append(event) }
    }
}
