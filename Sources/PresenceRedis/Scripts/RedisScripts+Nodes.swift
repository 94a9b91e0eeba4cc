extension RedisScripts {
    /// NODES: a node's beat in the cluster-wide node list, for operators (`/.admin/nodes`). Not a
    /// lease: liveness stays per namespace (BEAT). One call a beat also brings the operators'
    /// kicks (`/.admin/connections/<s>/close` for a connection on another node).
    /// KEYS: beats (zset: node id -> last beat, Redis ms), info (hash: node id -> opaque info),
    /// kicks (stream). ARGV: node id, info, last kick id seen ('' starts at the newest), forget after ms (a node with no beat for this long leaves the list), kick keep ms.
    /// -> {'OK', redis ms, last kick id, {id, beat, info, ...}, {kick entries as XRANGE gives them}}
    public static let nodes = RedisScript(name: "nodes", source: prelude + #"""
    local now = now_ms()
    redis.call('ZADD', KEYS[1], now, ARGV[1])
    redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
    local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. int(now - tonumber(ARGV[4])))
    for _, id in ipairs(old) do
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
    end
    local list = {}
    local beats = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    for i = 1, #beats, 2 do
      list[#list + 1] = beats[i]
      list[#list + 1] = beats[i + 1]
      list[#list + 1] = redis.call('HGET', KEYS[2], beats[i]) or ''
    end
    local last = ARGV[3]
    local kicks = {}
    if last == '' then
      local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)
      last = top[1] and top[1][1] or '0-0'
    else
      kicks = redis.call('XRANGE', KEYS[3], '(' .. last, '+', 'COUNT', 1000)
      if #kicks > 0 then last = kicks[#kicks][1] end
    end
    redis.call('XTRIM', KEYS[3], 'MINID', int(now - tonumber(ARGV[5])))
    return {'OK', now, last, list, kicks}
    """#)

    /// NODES_LEAVE: a graceful stop takes the node off the list at once.
    /// KEYS: beats, info. ARGV: node id. -> {'OK'}
    public static let nodesLeave = RedisScript(name: "nodes-leave", source: #"""
    redis.call('ZREM', KEYS[1], ARGV[1])
    redis.call('HDEL', KEYS[2], ARGV[1])
    return {'OK'}
    """#)
}
