extension RedisScripts {
    /// RELEASE: a node that no longer serves a namespace leaves its lease table quietly, so that it
    /// stops beating there (docs/scaling.md, "Idle leases"). No log entry and no `down` record: the
    /// node has nothing anyone must adopt, so nobody has to declare it dead, and it may JOIN again
    /// under the same id later. Refused while the caller owns sessions there, or while another
    /// node's sessions wait to be adopted (an expired node, or one in `down`): reaping comes first.
    /// KEYS: head, nodes, down, owned set of the caller. ARGV: node id, epoch.
    /// -> {'RELEASED'} | {'BUSY', reason} | {'EPOCH', current} | {'FENCED'}
    public static let release = RedisScript(name: "release", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[2], ARGV[1], h[2], now) then return {'FENCED'} end
    if redis.call('SCARD', KEYS[4]) > 0 then return {'BUSY', 'sessions'} end
    if redis.call('HLEN', KEYS[3]) > 0 then return {'BUSY', 'down'} end
    local all = redis.call('HGETALL', KEYS[2])
    for i = 1, #all, 2 do
      if now - tonumber(all[i + 1]) > tonumber(h[2]) then return {'BUSY', 'expired'} end
    end
    redis.call('HDEL', KEYS[2], ARGV[1])
    return {'RELEASED'}
    """#)
}

extension NodeLease {
    public enum Release: Sendable, Equatable {
        /// Out of the lease table: stop beating; JOIN again before acting in this namespace.
        case released
        /// Still a member (`reason`: `sessions`, `down` or `expired`): keep beating.
        case busy(reason: String)
        case epochMismatch(current: String?)
        case fenced
    }

    /// Leaves the lease table of a namespace this node no longer serves and owns no sessions of.
    public func release(completion: @escaping (Result<Release, RedisError>) -> Void) {
        connection.run(RedisScripts.release, keys: [keys.head, keys.nodes, keys.down, keys.owned(by: node.id)],
                       arguments: [node.id, epoch], parse: { reply in
            switch reply.status {
            case "RELEASED": return .released
            case "BUSY": return .busy(reason: reply.string(0) ?? "")
            case "EPOCH": return .epochMismatch(current: reply.currentEpoch)
            case "FENCED": return .fenced
            default: return nil
            }
        }, completion: completion)
    }
}
