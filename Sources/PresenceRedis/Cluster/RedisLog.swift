/// A namespace's ordered log in Redis: the stream every node tails and applies in `rev` order.
/// Appending goes through the SEQ script, which orders a step only for a node that holds its
/// lease, in the current epoch, and (for steps that consume a session) owns that session.
public final class RedisLog {
    public let connection: RedisConnection
    public let keys: RedisKeys

    public init(connection: RedisConnection, keys: RedisKeys) {
        self.connection = connection
        self.keys = keys
    }

    public enum Creation: Sendable, Equatable {
        case created(epoch: String)
        case exists(epoch: String, rev: UInt64)
        /// A log without a head (deleted by hand): refused, an operator must decide.
        case orphanLog
    }

    /// Creates the log with `epoch` (random, unique per history) unless one exists. The lease
    /// length is stored with it: one value for every node, whatever their flags say.
    public func create(epoch: String, leaseMilliseconds: Int64,
                       completion: @escaping (Result<Creation, RedisError>) -> Void) {
        connection.run(RedisScripts.create, keys: [keys.head, keys.log], arguments: [epoch, leaseMilliseconds],
                       parse: { reply in
            switch reply.status {
            case "CREATED": return reply.string(0).map { .created(epoch: $0) }
            case "EXISTS":
                guard let epoch = reply.string(0), let rev = reply.integer(1) else { return nil }
                return .exists(epoch: epoch, rev: UInt64(max(0, rev)))
            case "ORPHAN_LOG": return .orphanLog
            default: return nil
            }
        }, completion: completion)
    }

    public struct Head: Sendable, Equatable {
        public var rev: UInt64
        public var epoch: String
        public var leaseMilliseconds: Int64
        /// The current snapshot's rev (0: none), the previous one kept for loaders, and the oldest
        /// rev still in the log: a node at applied rev A can catch up from the log iff A + 1 >= min.
        public var snapshot: UInt64
        public var previousSnapshot: UInt64
        public var min: UInt64
    }

    /// The head, or nil when the namespace has no log (never created, or Redis lost it).
    public func head(completion: @escaping (Result<Head?, RedisError>) -> Void) {
        let command = RedisCommand("HMGET", keys.head, "epoch", "rev", "lease", "snap", "prev", "min")
        connection.send(command) { result in
            completion(result.flatMap { reply in
                guard let fields = reply.array, fields.count == 6 else {
                    return .failure(.unexpectedReply("HMGET head: \(reply)"))
                }
                guard let epoch = fields[0].string else { return .success(nil) }
                func number(_ i: Int) -> UInt64 { UInt64(max(0, fields[i].integer ?? 0)) }
                return .success(Head(rev: number(1), epoch: epoch, leaseMilliseconds: fields[2].integer ?? 0,
                                     snapshot: number(3), previousSnapshot: number(4), min: max(1, number(5))))
            })
        }
    }

    /// Which session a step claims (SEQ checks the proposer owns it).
    public enum SessionClaim: Sendable, Equatable {
        case none
        /// The step acts for the session (checks ownership only).
        case own(String)
        /// The step runs the session's held ops: on success the session record is gone.
        case run(String)
    }

    public enum Append: Sendable, Equatable {
        case appended(rev: UInt64, redisTime: Int64)
        /// The log's epoch is not the caller's (nil: no log). Redis lost or replaced its history.
        case epochMismatch(current: String?)
        /// The caller's lease has expired (or it never joined): it must stop and rejoin.
        case fenced
        case notOwner(owner: String)
    }

    /// Appends `payload` for `node`. A `.failure` whose `outcomeUnknown` is true may still have
    /// been appended: resolve it by reading the log (`range`) before reporting anything.
    public func append(node: String, epoch: String, payload: [UInt8], claim: SessionClaim = .none,
                       completion: @escaping (Result<Append, RedisError>) -> Void) {
        let (mode, session): (String, String) = switch claim {
        case .none: ("", "")
        case .own(let id): ("own", id)
        case .run(let id): ("run", id)
        }
        let record = session.isEmpty ? keys.noSession : keys.session(session)
        connection.run(RedisScripts.sequence, keys: [keys.head, keys.log, keys.nodes, record, keys.owned(by: node)],
                       arguments: [node, epoch, payload, mode, session], parse: { reply in
            switch reply.status {
            case "OK":
                guard let rev = reply.integer(0), let time = reply.integer(1) else { return nil }
                return .appended(rev: UInt64(max(0, rev)), redisTime: time)
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            case "NOT_OWNER": return .notOwner(owner: reply.string(0) ?? "")
            default: return nil
            }
        }, completion: completion)
    }

    /// Up to `count` entries with rev > `rev`, in order (catching up, resolving unknown outcomes).
    public func range(after rev: UInt64, count: Int,
                      completion: @escaping (Result<[RedisLogEntry], RedisError>) -> Void) {
        let command = RedisCommand("XRANGE", keys.log, "\(min(rev, UInt64.max - 1) + 1)-0", "+", "COUNT", max(1, count))
        connection.send(command) { result in
            completion(result.flatMap { reply in
                guard let items = reply.array else { return .failure(.unexpectedReply("XRANGE: \(reply)")) }
                var entries: [RedisLogEntry] = []
                entries.reserveCapacity(items.count)
                for item in items {
                    guard let entry = RedisLogEntry(item) else { return .failure(.unexpectedReply("log entry: \(item)")) }
                    entries.append(entry)
                }
                return .success(entries)
            })
        }
    }
}
