/// Requests outside the wire protocol (REST reads and writes, rules uploads, streams) with one API
/// for both modes. A single node answers at once (`DirectAnswer.now`). A replicated node answers
/// through a ticket (`DirectAnswer.later`, then `takeDirectOutcomes`): it follows the namespace
/// if it did not (the request waits until the replica has caught up, at most
/// `ReplicationConfiguration.loadWaitMilliseconds`), evaluates the request on the replica like a
/// wire request, proposes a change (a write, `setRules`, a limited read's `limitUsage`) and
/// answers when that entry has committed here, with the same refusals as the wire path.
extension Engine {
    /// The outcomes decided since the last call (replicated mode), in order.
    public func takeDirectOutcomes() -> [(DirectTicket, DirectOutcome)] {
        if direct.outcomes.isEmpty { return [] } // every engine step asks
        defer { direct.outcomes.removeAll(keepingCapacity: true) }
        return direct.outcomes
    }

    /// A REST read (`read`'s parameters).
    public func submitRead(_ path: Path, namespace name: String, credentials: Credentials, now: Int64,
                           query: QuerySpec = .default, countsAsUse: Bool = false, shallow: Bool = false,
                           sliced: DeferredRead.Form? = nil, hashed: Bool = false) -> DirectAnswer {
        guard configuration.replication != nil else {
            if let sliced, replicaRefusal(name) == nil,
               let deferred = deferredRead(path, credentials: credentials, in: existingNamespace(name), now: now, query: query,
                                           filtered: true, form: sliced, countsUseAtEnd: countsAsUse) {
                return .now(DirectOutcome(deferred))
            }
            return .now(.read(read(path, namespace: name, credentials: credentials, now: now, query: query,
                                   countsAsUse: countsAsUse, shallow: shallow, hashed: hashed)))
        }
        return submit(.read(path, credentials, query, countsAsUse: countsAsUse, shallow: shallow, sliced: sliced, hashed: hashed),
                      namespace: name, now: now)
    }

    /// A REST write (`write`'s parameters). `readBack`: the location whose value the answer
    /// carries (`DirectWriteResult.readBack`), read when the write is decided.
    public func submitWrite(_ operation: DirectWrite, at path: Path, namespace name: String, credentials: Credentials, now: Int64,
                            ifMatch: (path: Path, etag: String)? = nil, readBack: Path? = nil) -> DirectAnswer {
        guard configuration.replication != nil else {
            let result = write(operation, at: path, namespace: name, credentials: credentials, now: now, ifMatch: ifMatch)
            var value: Node?
            if let readBack, Self.readsBack(result) {
                // Past --max-hash-bytes: no ETag (and the read stops at that budget).
                value = try? read(readBack, namespace: name, credentials: credentials, now: now, hashed: true).get()
            }
            return .now(.write(DirectWriteResult(result: result, readBack: value)))
        }
        return submit(.write(operation, path, credentials, ifMatch: ifMatch, readBack: readBack), namespace: name, now: now)
    }

    /// A namespace's own rules (REST `PUT /.settings/rules.json`; the caller checked the admin
    /// credential and parsed `text` into `rules`). Replicated, the text goes through the log and
    /// every node installs it at its revision.
    public func submitRules(_ rules: RuleSet, text: String, namespace name: String, now: Int64) -> DirectAnswer {
        guard configuration.replication != nil else {
            setRules(rules, text: text, namespace: name, now: now)
            return .now(.rules(.success(())))
        }
        return submit(.rules(document: text), namespace: name, now: now)
    }

    /// The rules in force for a namespace (REST `GET /.settings/rules.json`); replicated, once the
    /// namespace is loaded here (its own rules come from the log).
    public func submitRulesDocument(namespace name: String, now: Int64) -> DirectAnswer {
        guard configuration.replication != nil else { return .now(.rulesDocument(rules(namespace: name))) }
        return submit(.rulesDocument, namespace: name, now: now)
    }

    /// A streaming read (`openStream`'s parameters). Replicated, connection `id` exists from now
    /// on (disconnect it if the client leaves first); it listens once the outcome is a success.
    public func submitStream(_ id: ConnectionID, path: Path, namespace name: String, credentials: Credentials,
                             query: QuerySpec, now: Int64) -> DirectAnswer {
        guard configuration.replication != nil else {
            return .now(.stream(openStream(id, path: path, namespace: name, credentials: credentials, query: query, now: now)))
        }
        return submit(.stream(id, path, credentials, query), namespace: name, now: now)
    }

    // MARK: Replicated

    func submit(_ request: DirectRequest, namespace name: String, now: Int64) -> DirectAnswer {
        let ticket = direct.nextTicket()
        let ns = namespace(name)
        if case let .stream(id, _, credentials, _) = request {
            let connection = Connection(id: id, namespace: name, sessionID: "stream-\(id.raw)")
            connection.credentials = credentials
            connections[id] = connection
            ns.connectionCount += 1
        }
        if ns.replica?.serving == true {
            run(.direct(ticket, namespace: name, request), attempt: 0, now: now)
        } else {
            let wait = max(0, configuration.replication?.loadWaitMilliseconds ?? 0)
            let deadline = now.addingReportingOverflow(wait).overflow ? Int64.max : now + wait
            direct.waiting[name, default: []].append(.init(ticket: ticket, request: request, deadline: deadline))
            ns.replica?.pendingSteps += 1
            if direct.earliestDeadline.map({ deadline < $0 }) ?? true { direct.earliestDeadline = deadline }
            scheduleDeadline(deadline)
        }
        return .later(ticket)
    }

    /// With a proposal context (`run`): the request on the replica. A change is proposed and
    /// answered in `completeDirect` or `failDirect`; anything else is answered now.
    func evaluateDirect(_ ticket: DirectTicket, namespace name: String, _ request: DirectRequest, now: Int64) {
        let ns = namespace(name)
        switch request {
        case let .read(path, credentials, query, countsAsUse, shallow, sliced, hashed):
            if let sliced, let deferred = deferredRead(path, credentials: credentials, in: ns, now: now, query: query,
                                                       filtered: true, form: sliced) {
                return finishDirect(ticket, namespace: name, request, DirectOutcome(deferred), now: now)
            }
            let result = limitedRead(path, credentials: credentials, in: ns, now: now, query: query, filtered: true,
                                     shape: shallow ? .shallow : .full, countsAsUse: countsAsUse, hashed: hashed)
            if awaitsLog { return }
            finishDirect(ticket, namespace: name, request, .read(result), now: now)
        case let .write(operation, path, credentials, ifMatch, readBack):
            guard let result = checkedWrite(operation, at: path, in: ns, credentials: credentials, now: now, ifMatch: ifMatch) else { return }
            let value = readBackValue(readBack, after: result, credentials: credentials, namespace: name, now: now)
            finishDirect(ticket, namespace: name, request, .write(DirectWriteResult(result: result, readBack: value)), now: now)
        case .rules(let document):
            if let refusal = propose(.setRules(document: document), writes: [], in: ns, identity: nil, label: "rules") {
                finishDirect(ticket, namespace: name, request, .rules(.failure(refusal)), now: now)
            }
        case let .stream(id, path, _, query):
            guard let connection = connections[id] else { return } // the client left meanwhile
            // The connection's credentials: its token may have expired while it waited.
            let result = streamFirstMessage(path, credentials: connection.credentials, in: ns, now: now, query: query)
            if awaitsLog { return }
            if case .success(let first) = result { attachStream(connection, path: path, query: query, first: first, in: ns) }
            finishDirect(ticket, namespace: name, request, .stream(result.map { _ in () }), now: now)
        case .rulesDocument:
            finishDirect(ticket, namespace: name, request, .rulesDocument(rules(namespace: name)), now: now)
        case .resetLimit(let key):
            proposal?.limitChanges = [LogEntry.LimitUsageChange(limit: key.limit, uid: key.uid, usage: nil)]
            direct.resetHadUsage[ticket] = limitUsage[key] != nil
            if let refusal = propose(.limitUsage, writes: [], in: ns, identity: nil, label: "reset") {
                finishDirect(ticket, namespace: name, request, .reset(.failure(refusal)), now: now)
            }
        }
    }

    /// The request's entry committed (a limited read is served by running it again instead).
    func completeDirect(_ ticket: DirectTicket, namespace name: String, _ request: DirectRequest, writes: [(Path, Node)], now: Int64) {
        switch request {
        case let .write(_, _, credentials, _, readBack):
            let result: Result<[(Path, Node)], EngineError> = .success(writes)
            let value = readBackValue(readBack, after: result, credentials: credentials, namespace: name, now: now)
            finishDirect(ticket, namespace: name, request, .write(DirectWriteResult(result: result, readBack: value)), now: now)
        case .rules:
            finishDirect(ticket, namespace: name, request, .rules(.success(())), now: now)
        case .resetLimit:
            finishDirect(ticket, namespace: name, request, .reset(.success(direct.resetHadUsage[ticket] ?? false)), now: now)
        case .read, .stream, .rulesDocument:
            break
        }
    }

    /// The request's entry aborted for good, or never reached the log.
    func failDirect(_ ticket: DirectTicket, namespace name: String, _ request: DirectRequest, _ error: EngineError, now: Int64) {
        let outcome: DirectOutcome
        switch request {
        case .read: outcome = .read(.failure(error))
        case let .write(_, _, credentials, _, readBack):
            let result: Result<[(Path, Node)], EngineError> = .failure(error)
            outcome = .write(DirectWriteResult(result: result, readBack: readBackValue(readBack, after: result, credentials: credentials,
                                                                                         namespace: name, now: now)))
        case .rules: outcome = .rules(.failure(error))
        case .stream: outcome = .stream(.failure(error))
        case .rulesDocument: outcome = .read(.failure(error))
        case .resetLimit: outcome = .reset(.failure(error))
        }
        finishDirect(ticket, namespace: name, request, outcome, now: now)
    }

    private func finishDirect(_ ticket: DirectTicket, namespace name: String, _ request: DirectRequest, _ outcome: DirectOutcome, now: Int64) {
        // A stream that will not open leaves the engine (its connection kept the namespace).
        if case .stream(let id, _, _, _) = request, case .stream(.failure) = outcome { disconnect(id, now: now) }
        direct.outcomes.append((ticket, outcome))
        direct.resetHadUsage[ticket] = nil
        if let ns = namespaces[name] { releaseIfIdle(ns, now: now) }
    }

    /// Inside `run`: the current request created a step (it waits for the log).
    var awaitsLog: Bool { proposal?.step != nil }

    private static func readsBack(_ result: Result<[(Path, Node)], EngineError>) -> Bool {
        switch result {
        case .success, .failure(.dataStale): true
        case .failure: false
        }
    }

    /// The value at `path` now, for a write that committed or was refused as stale, when these
    /// credentials may read it (an ETag is a hash of the data) and it is within `--max-hash-bytes`
    /// (past it the answer has no ETag, and a 412 no value).
    private func readBackValue(_ path: Path?, after result: Result<[(Path, Node)], EngineError>, credentials: Credentials,
                               namespace name: String, now: Int64) -> Node? {
        guard let path, Self.readsBack(result), let ns = namespaces[name] else { return nil }
        return try? limitedRead(path, credentials: credentials, in: ns, now: now, query: .default, filtered: true,
                                countsAsUse: false, hashed: true).get()
    }

    // MARK: Waiting for the namespace

    /// The namespace has caught up: its waiting requests are evaluated, in arrival order.
    func runWaitingDirect(namespace name: String, now: Int64) {
        guard let waiting = direct.waiting.removeValue(forKey: name) else { return }
        for entry in waiting {
            namespaces[name]?.replica?.pendingSteps -= 1
            run(.direct(entry.ticket, namespace: name, entry.request), attempt: 0, now: now)
        }
        if let ns = namespaces[name] { releaseIfIdle(ns, now: now) }
    }

    /// Requests that waited too long for their namespace are answered `unavailable`.
    func expireDirectWaits(now: Int64) {
        guard let earliest = direct.earliestDeadline else { return }
        guard earliest <= now else { return scheduleDeadline(earliest) }
        direct.earliestDeadline = nil
        var expired: [(String, DirectRequests.Waiting)] = []
        for name in direct.waiting.keys.sorted() {
            var kept: [DirectRequests.Waiting] = []
            for entry in direct.waiting[name]! {
                if entry.deadline <= now {
                    expired.append((name, entry))
                } else {
                    kept.append(entry)
                    if direct.earliestDeadline.map({ entry.deadline < $0 }) ?? true { direct.earliestDeadline = entry.deadline }
                }
            }
            direct.waiting[name] = kept.isEmpty ? nil : kept
        }
        if let next = direct.earliestDeadline { scheduleDeadline(next) }
        for (name, entry) in expired {
            namespaces[name]?.replica?.pendingSteps -= 1
            failDirect(entry.ticket, namespace: name, entry.request,
                       .unavailable("this node is still loading namespace \(name) (catching up with its log); retry"), now: now)
        }
    }

    // MARK: Limited reads

    /// One use of the limit guarding a read. Replicated, the use is proposed as a `limitUsage`
    /// entry (the read waits and is served when it commits, so uses count once in the cluster);
    /// a read whose use committed uses nothing more.
    func useReadLimit(at path: Path, credentials: Credentials, in ns: Namespace, now: Int64) -> EngineError? {
        guard let context = proposal, configuration.replication != nil else {
            return useLimit(at: path, credentials: credentials, in: ns, now: now)
        }
        if context.usesCommitted { return nil }
        context.collectsLimitUsage = true
        let refusal = useLimit(at: path, credentials: credentials, in: ns, now: now)
        context.collectsLimitUsage = false
        if let refusal {
            context.limitChanges = []
            return refusal
        }
        guard !context.limitChanges.isEmpty else { return nil }
        return propose(.limitUsage, writes: [], in: ns, identity: credentials.identity, label: "read", waitKind: .limitedRead)
    }
}
