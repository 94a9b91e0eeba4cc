import PresenceCore
import PresenceRedis

/// Session records in Redis (SESSION, TAKEOVER) for the engine's `SessionCommand`s, and the
/// adoption of a dead node's sessions (REAP). A record's ops are `StorageCoding.json(session)` as
/// JSON text, and each appended change `StorageCoding.json(identity:changes:)`; Lua never reads them.
extension ClusterLink {
    func perform(_ command: SessionCommand, on member: ClusterNamespace) {
        guard let sessions = member.sessions else { return }
        let id = command.session
        guard SessionRecord.isValidID(id) else {
            return replyLater(command.reply, .failed("invalid session id"))
        }
        switch command.action {
        case .put(let session):
            sessions.put(id, ops: Self.encode(session)) { [unowned self] result in done(command, result) }
        case let .change(identity, changes):
            // Appended in O(1); the engine sends a whole `put` once the changes outnumber the ops.
            let change = Array(JSONWriter.string(StorageCoding.json(identity: identity, changes: changes)).utf8)
            sessions.append(id, change: change) { [unowned self] result in done(command, result) }
        case let .hold(disconnectedAt, runAt):
            sessions.hold(id, disconnectedAt: disconnectedAt, runAt: runAt) { [unowned self] result in done(command, result) }
        case .drop:
            sessions.drop(id) { [unowned self] result in done(command, result) }
        case let .takeover(now, grace):
            sessions.takeover(id, now: now, graceMilliseconds: grace) { [unowned self] result in
                runtime.dispatch { tookOver(id, result, in: member) }
            }
        }
    }

    private func done(_ command: SessionCommand, _ result: Result<RedisSessions.Change, RedisError>) {
        runtime.dispatch {
            let outcome: SessionCommandResult
            switch result {
            case .success(.done): outcome = .done
            case .success(.absent): outcome = .failed("ABSENT")
            case .success(.notOwner(let owner)): outcome = .failed("NOT_OWNER \(owner)")
            case .success(.epochMismatch): outcome = .failed("EPOCH")
            case .success(.fenced):
                outcome = .failed("FENCED")
                fence("the session store of namespace \(command.namespace) says this node's lease expired")
            case .failure(let error): outcome = .failed(error.description)
            }
            if case .failed(let reason) = outcome, command.reply == nil {
                logger.warning("session \(command.session) in \(command.namespace): \(command.action.name) failed (\(reason))")
            }
            guard let reply = command.reply else { return }
            answer { engine.sessionCommandDone(reply, outcome, now: $0) }
        }
    }

    /// A refusal decided here still reaches the engine after the current step, like an answer.
    private func replyLater(_ reply: UInt64?, _ result: SessionCommandResult) {
        guard let reply else { return }
        later { [unowned self] in answer { engine.sessionCommandDone(reply, result, now: $0) } }
    }

    private func tookOver(_ id: String, _ result: Result<RedisSessions.Takeover, RedisError>, in member: ClusterNamespace) {
        let outcome: TakeoverResult
        switch result {
        case .success(.taken(_, let record)), .success(.alreadyOwned(let record)):
            if let session = decode(record, in: member) {
                outcome = .held(session)
            } else {
                outcome = .failed("its stored ops do not decode")
            }
        case .success(.absent): outcome = .absent
        case .success(.epochMismatch): outcome = .failed("EPOCH")
        case .success(.fenced):
            outcome = .failed("FENCED")
            fence("TAKEOVER in namespace \(member.name) found this node's lease expired")
        case .failure(let error): outcome = .failed(error.description)
        }
        answer { engine.takeoverResolved(session: id, outcome, now: $0) }
    }

    /// REAP handed this node a dead or departed node's sessions: they are held here and run at
    /// their `runAt`, dated at the dead node's last beat.
    func adopt(_ records: [SessionRecord], in member: ClusterNamespace) {
        let sessions = records.compactMap { decode($0, in: member) }
        guard !sessions.isEmpty else { return }
        logger.notice("namespace \(member.name): adopted \(sessions.count) sessions of nodes that are gone")
        answer { engine.adoptSessions(sessions, now: $0) }
    }

    private func decode(_ record: SessionRecord, in member: ClusterNamespace) -> StoredSession? {
        do {
            return try Self.decode(record)
        } catch {
            logger.error("namespace \(member.name): session \(record.id)'s stored ops do not decode (\(error)); they are lost")
            return nil
        }
    }

    /// A record's ops: the last whole `put`, with the changes appended since replayed in order
    /// (the identity is the latest change's).
    static func decode(_ record: SessionRecord) throws -> StoredSession {
        var session = try StorageCoding.session(JSONParser.parse(bytes: record.ops))
        if !record.changes.isEmpty {
            var changes: [OnDisconnectChange] = []
            for bytes in record.changes {
                let change = try StorageCoding.changes(JSONParser.parse(bytes: bytes))
                session.identity = change.identity
                changes += change.changes
            }
            session.ops = StoredSession.replay(changes, onto: session.ops)
        }
        session.disconnectedAt = record.disconnectedAt
        session.runAt = record.runAt
        return session
    }

    static func encode(_ session: StoredSession) -> [UInt8] {
        Array(JSONWriter.string(StorageCoding.json(session)).utf8)
    }
}

extension SessionCommand.Action {
    /// For logs.
    var name: String {
        switch self {
        case .put: "put"
        case .change: "change"
        case .hold: "hold"
        case .drop: "drop"
        case .takeover: "takeover"
        }
    }
}
