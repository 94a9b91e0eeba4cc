/// The records of the sessions one node owns in one namespace: their onDisconnect ops, held
/// state and ownership moves (SESSION and TAKEOVER scripts). Only the owner changes a record;
/// running the held ops goes through the log (`RedisLog.append(claim: .run(id))`).
public final class RedisSessions {
    /// The node acting, in its namespace (its lease is what the scripts check).
    public let member: NodeLease
    public var node: String { member.node.id }
    private var connection: RedisConnection { member.connection }
    private var keys: RedisKeys { member.keys }
    private var epoch: String { member.epoch }

    public init(member: NodeLease) { self.member = member }

    public enum Change: Sendable, Equatable {
        case done
        /// `change`/`hold`/`drop` of a record that does not exist (already ran, or never had ops).
        case absent
        case notOwner(owner: String)
        case epochMismatch(current: String?)
        case fenced
    }

    /// The session's ops changed (`o`, `om`, `oc`): create or replace its record, live, owned by this node.
    public func put(_ id: String, ops: [UInt8], completion: @escaping (Result<Change, RedisError>) -> Void) {
        command(id, op: "put", extra: [ops], completion: completion)
    }

    /// One edit of the session's ops (a large queue's `o`/`oc`): appended to its record in O(1),
    /// whatever the number of ops. Readers replay `changes` onto `ops`; send a whole `put` again
    /// once the changes outnumber the ops, so a record stays proportional to its queue.
    public func append(_ id: String, change: [UInt8], completion: @escaping (Result<Change, RedisError>) -> Void) {
        command(id, op: "change", extra: [change], completion: completion)
    }

    /// The session's connection dropped: held from `disconnectedAt`, to run at `runAt` (node ms).
    public func hold(_ id: String, disconnectedAt: Int64, runAt: Int64,
                     completion: @escaping (Result<Change, RedisError>) -> Void) {
        command(id, op: "hold", extra: [disconnectedAt, runAt], completion: completion)
    }

    /// The session's ops are gone (cancelled, or the session ended without any): delete its record.
    public func drop(_ id: String, completion: @escaping (Result<Change, RedisError>) -> Void) {
        command(id, op: "drop", extra: [], completion: completion)
    }

    private func command(_ id: String, op: String, extra: [any RedisArgument],
                        completion: @escaping (Result<Change, RedisError>) -> Void) {
        guard SessionRecord.isValidID(id) else {
            return connection.later { completion(.failure(.notSent("session id must be 1-256 bytes"))) }
        }
        let arguments: [any RedisArgument] = [node, epoch, op, id]
        connection.run(RedisScripts.session, keys: [keys.head, keys.nodes, keys.session(id), keys.owned(by: node)],
                       arguments: arguments + extra, parse: { reply in
            switch reply.status {
            case "OK": return .done
            case "ABSENT": return .absent
            case "NOT_OWNER": return .notOwner(owner: reply.string(0) ?? "")
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            default: return nil
            }
        }, completion: completion)
    }

    public enum Takeover: Sendable, Equatable {
        /// Moved to this node as held (`record.previousOwner` closes its connection on the
        /// `takeover` entry at `rev`). Cancel the ops when the new connection authenticates as
        /// the same user, or run them at `record.runAt`.
        case taken(rev: UInt64, record: SessionRecord)
        /// Already this node's (the client came back to the same node).
        case alreadyOwned(SessionRecord)
        /// No record: its ops already ran, or it never had any.
        case absent
        case epochMismatch(current: String?)
        case fenced
    }

    /// A client connected here with `ls=<id>`. `now` is this node's clock; a live session counts
    /// as disconnected now (or at its dead owner's last beat, if earlier) and runs after `grace`.
    public func takeover(_ id: String, now: Int64, graceMilliseconds: Int64,
                         completion: @escaping (Result<Takeover, RedisError>) -> Void) {
        guard SessionRecord.isValidID(id) else {
            return connection.later { completion(.failure(.notSent("session id must be 1-256 bytes"))) }
        }
        let node = self.node
        connection.run(RedisScripts.takeover,
                       keys: [keys.head, keys.log, keys.nodes, keys.down, keys.session(id), keys.owned(by: node)],
                       arguments: [node, epoch, id, now, max(0, graceMilliseconds)], parse: { reply in
            switch reply.status {
            case "TAKEN":
                guard let rev = reply.integer(0), let from = reply.string(1), let state = reply.string(2),
                      let at = reply.integer(3), let runAt = reply.integer(4), let ops = reply.bytes(5),
                      let changes = SessionRecord.changes(reply.fields.count > 6 ? reply.fields[6] : nil) else { return nil }
                return .taken(rev: UInt64(max(0, rev)), record: SessionRecord(
                    id: id, owner: node, state: .held, disconnectedAt: at, runAt: runAt, ops: ops, changes: changes,
                    previousOwner: from, previousState: SessionRecord.State(rawValue: state)))
            case "OWNED":
                guard let state = reply.string(0).flatMap(SessionRecord.State.init(rawValue:)),
                      let at = reply.integer(1), let runAt = reply.integer(2), let ops = reply.bytes(3),
                      let changes = SessionRecord.changes(reply.fields.count > 4 ? reply.fields[4] : nil) else { return nil }
                return .alreadyOwned(SessionRecord(id: id, owner: node, state: state,
                                                   disconnectedAt: state == .held ? at : nil,
                                                   runAt: state == .held ? runAt : nil, ops: ops, changes: changes))
            case "ABSENT": return .absent
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            default: return nil
            }
        }, completion: completion)
    }

    /// Reads a record as it is (operators, tests); nil when absent.
    public func record(_ id: String, completion: @escaping (Result<SessionRecord?, RedisError>) -> Void) {
        guard SessionRecord.isValidID(id) else {
            return connection.later { completion(.failure(.notSent("session id must be 1-256 bytes"))) }
        }
        connection.send(RedisCommand("HGETALL", keys.session(id))) { result in
            completion(result.flatMap { reply in
                guard let pairs = reply.array, pairs.count % 2 == 0 else { return .failure(.unexpectedReply("HGETALL: \(reply)")) }
                var fields: [String: RedisReply] = [:]
                for index in stride(from: 0, to: pairs.count, by: 2) {
                    if let name = pairs[index].string { fields[name] = pairs[index + 1] }
                }
                guard let owner = fields["owner"]?.string else { return .success(nil) }
                let count = min(fields["n"]?.integer ?? 0, Int64(pairs.count / 2))
                let changes = count > 0 ? (1...count).compactMap { fields["c\($0)"]?.bytes } : []
                return .success(SessionRecord(id: id, owner: owner,
                                              state: fields["state"]?.string.flatMap(SessionRecord.State.init(rawValue:)) ?? .live,
                                              disconnectedAt: fields["at"]?.integer, runAt: fields["runAt"]?.integer,
                                              ops: fields["ops"]?.bytes ?? [], changes: changes))
            })
        }
    }
}
