/// One node's membership in one namespace: its lease (JOIN, BEAT, LEAVE) and the reaping of
/// nodes whose lease expired (REAP). Liveness is judged on Redis's clock (`TIME` inside the
/// scripts), so node clock skew does not matter; `LeaseMonitor` holds the node-side rules.
public final class NodeLease {
    public let connection: RedisConnection
    public let keys: RedisKeys
    public let node: NodeIdentity
    public let epoch: String

    public init(connection: RedisConnection, keys: RedisKeys, node: NodeIdentity, epoch: String) {
        self.connection = connection
        self.keys = keys
        self.node = node
        self.epoch = epoch
    }

    public enum Join: Sendable, Equatable {
        /// In the lease table; `replaced` are earlier incarnations of this node's name, now dead.
        case joined(redisTime: Int64, leaseMilliseconds: Int64, replaced: [String])
        case epochMismatch(current: String?)
        /// This incarnation's lease already expired (or it was reaped): join as a new incarnation.
        case expired
        case dead
    }

    public func join(completion: @escaping (Result<Join, RedisError>) -> Void) {
        connection.run(RedisScripts.join, keys: [keys.head, keys.log, keys.nodes, keys.down],
                       arguments: [node.id, epoch, node.name], parse: { reply in
            switch reply.status {
            case "OK":
                guard let time = reply.integer(0), let lease = reply.integer(1) else { return nil }
                return .joined(redisTime: time, leaseMilliseconds: lease,
                               replaced: (reply.array(2) ?? []).compactMap(\.string))
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "EXPIRED": return .expired
            case "DEAD": return .dead
            default: return nil
            }
        }, completion: completion)
    }

    public enum Beat: Sendable, Equatable {
        /// Renewed at `redisTime`; `headRev` lets the node measure its lag; `reapDue`: an expired
        /// lease or a down node's sessions wait for REAP.
        case alive(redisTime: Int64, headRev: UInt64, reapDue: Bool)
        case epochMismatch(current: String?)
        /// Too late: the lease ran out at `lastBeat + lease`. Stop; rejoin as a new incarnation.
        case expired(lastBeat: Int64)
        /// Not in the lease table (reaped, or never joined).
        case unknown
    }

    public func beat(completion: @escaping (Result<Beat, RedisError>) -> Void) {
        connection.run(RedisScripts.beat, keys: [keys.head, keys.nodes, keys.down], arguments: [node.id, epoch], parse: { reply in
            switch reply.status {
            case "OK":
                guard let time = reply.integer(0), let rev = reply.integer(1) else { return nil }
                return .alive(redisTime: time, headRev: UInt64(max(0, rev)), reapDue: (reply.integer(2) ?? 1) != 0)
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "EXPIRED": return reply.integer(0).map { .expired(lastBeat: $0) }
            case "UNKNOWN": return .unknown
            default: return nil
            }
        }, completion: completion)
    }

    public enum Leave: Sendable, Equatable {
        case left(rev: UInt64)
        case epochMismatch(current: String?)
        case fenced
    }

    /// A graceful stop: the node's live sessions count as disconnected at `now` (node ms) and are
    /// adopted by the survivors' next reap.
    public func leave(now: Int64, completion: @escaping (Result<Leave, RedisError>) -> Void) {
        connection.run(RedisScripts.leave, keys: [keys.head, keys.log, keys.nodes, keys.down],
                       arguments: [node.id, epoch, now], parse: { reply in
            switch reply.status {
            case "OK": return reply.integer(0).map { .left(rev: UInt64(max(0, $0))) }
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            default: return nil
            }
        }, completion: completion)
    }

    public struct DeadNode: Sendable, Equatable {
        public var node: String
        /// Redis ms: its live sessions count as disconnected at this time.
        public var lastBeat: Int64
    }

    public struct Reaped: Sendable, Equatable {
        /// Nodes declared dead by this call.
        public var dead: [DeadNode]
        /// Sessions now held by this node: run their ops at `runAt` unless their user comes back.
        public var adopted: [SessionRecord]
        /// More sessions of down nodes remain: call again.
        public var more: Bool
    }

    public enum Reap: Sendable, Equatable {
        case reaped(Reaped)
        case epochMismatch(current: String?)
        case fenced
    }

    /// Declares nodes with an expired lease dead and adopts up to `batch` of the sessions of dead
    /// or departed nodes. `now` is the node's clock (adopted live sessions run at now + grace).
    public func reap(now: Int64, graceMilliseconds: Int64, batch: Int = 1000,
                     completion: @escaping (Result<Reap, RedisError>) -> Void) {
        let owner = node.id
        connection.run(RedisScripts.reap, keys: [keys.head, keys.log, keys.nodes, keys.down, keys.owned(by: owner)],
                       arguments: [owner, epoch, now, max(0, graceMilliseconds), max(1, batch)], parse: { reply in
            switch reply.status {
            case "OK":
                guard let deadList = reply.array(0), let adoptedList = reply.array(1), let more = reply.integer(2) else {
                    return nil
                }
                var dead: [DeadNode] = []
                var index = 0
                while index + 1 < deadList.count {
                    guard let name = deadList[index].string, let beat = deadList[index + 1].integer else { return nil }
                    dead.append(DeadNode(node: name, lastBeat: beat))
                    index += 2
                }
                var adopted: [SessionRecord] = []
                for item in adoptedList {
                    guard let fields = item.array, fields.count == 7, let id = fields[0].string,
                          let at = fields[3].integer, let runAt = fields[4].integer, let ops = fields[5].bytes,
                          let changes = SessionRecord.changes(fields[6]) else { return nil }
                    adopted.append(SessionRecord(id: id, owner: owner, state: .held, disconnectedAt: at, runAt: runAt, ops: ops,
                                                 changes: changes,
                                                 previousOwner: fields[1].string,
                                                 previousState: fields[2].string.flatMap(SessionRecord.State.init(rawValue:))))
                }
                return .reaped(Reaped(dead: dead, adopted: adopted, more: more != 0))
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            default: return nil
            }
        }, completion: completion)
    }
}
