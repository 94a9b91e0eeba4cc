extension RedisScripts {
    /// SESSION: the owner's changes to a session record (its onDisconnect ops). Not logged: only
    /// the owner keeps a session's ops, other nodes never need them.
    /// - `put` (ops registered, `o`/`om`/`oc`): creates the record (owner = caller, live) or
    ///   replaces the ops of one the caller owns, forgetting its changes.
    /// - `change` (one edit of a large queue): appends the opaque change as field `c<n>` (`n`
    ///   counts them), O(1) whatever the number of ops. Readers replay the changes onto `ops` in
    ///   order; the owner sends a whole `put` again once the changes outnumber the ops.
    /// - `hold` (the connection dropped): state held, `at` = disconnect time, `runAt`.
    /// - `drop` (ops cancelled, or the session ended without any): deletes the record.
    /// KEYS: head, nodes, session record, owned set of the caller.
    /// ARGV: node id, epoch, op, session id, then ops (put), the change (change) or at, runAt (hold).
    /// -> {'OK'} | {'ABSENT'} (change, hold, drop) | {'NOT_OWNER', owner} | {'EPOCH', current} | {'FENCED'}
    public static let session = RedisScript(name: "session", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[2], ARGV[1], h[2], now) then return {'FENCED'} end
    local owner = redis.call('HGET', KEYS[3], 'owner')
    if ARGV[3] == 'put' then
      if owner and owner ~= ARGV[1] then return {'NOT_OWNER', owner} end
      redis.call('DEL', KEYS[3])
      redis.call('HSET', KEYS[3], 'owner', ARGV[1], 'state', 'live', 'ops', ARGV[5])
      redis.call('SADD', KEYS[4], ARGV[4])
      return {'OK'}
    end
    if not owner then return {'ABSENT'} end
    if owner ~= ARGV[1] then return {'NOT_OWNER', owner} end
    if ARGV[3] == 'change' then
      local n = redis.call('HINCRBY', KEYS[3], 'n', 1)
      redis.call('HSET', KEYS[3], 'c' .. int(n), ARGV[5])
      return {'OK'}
    end
    if ARGV[3] == 'hold' then
      redis.call('HSET', KEYS[3], 'state', 'held', 'at', ARGV[5], 'runAt', ARGV[6])
      return {'OK'}
    end
    if ARGV[3] == 'drop' then
      redis.call('DEL', KEYS[3])
      redis.call('SREM', KEYS[4], ARGV[4])
      return {'OK'}
    end
    return redis.error_reply('unknown session op ' .. ARGV[3])
    """#)

    /// TAKEOVER: a client reconnected to the caller with `ls=<session>`. The record moves to the
    /// caller as `held` (a live one counts as disconnected now, or at its owner's death if that
    /// was earlier, and runs after the grace window; a held one keeps its times), and a `takeover`
    /// entry tells the old owner to close that connection (4001) without running its ops. The
    /// caller then cancels the held ops when the new connection authenticates as the same user.
    /// KEYS: head, log, nodes, down, session record, owned set of the caller.
    /// ARGV: node id, epoch, session id, now (node ms), grace ms.
    /// -> {'TAKEN', rev, from, previous state, at, runAt, ops, {changes}} | {'OWNED', state, at, runAt, ops, {changes}}
    ///    | {'ABSENT'} | {'EPOCH', current} | {'FENCED'}
    public static let takeover = RedisScript(name: "takeover", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[3], ARGV[1], h[2], now) then return {'FENCED'} end
    local r = redis.call('HMGET', KEYS[5], 'owner', 'state', 'at', 'runAt', 'ops', 'n')
    if not r[1] then return {'ABSENT'} end
    if r[1] == ARGV[1] then
      return {'OWNED', r[2] or 'live', tonumber(r[3] or '0'), tonumber(r[4] or '0'), r[5] or '', changes_of(KEYS[5], r[6])}
    end
    local from = r[1]
    local at, runAt = r[3], r[4]
    if r[2] ~= 'held' or not at or not runAt then
      local t = tonumber(ARGV[4])
      local downAt = redis.call('HGET', KEYS[4], from)
      if downAt and tonumber(downAt) < t then t = tonumber(downAt) end
      local beat = redis.call('HGET', KEYS[3], from)
      if beat and now - tonumber(beat) > tonumber(h[2]) and tonumber(beat) < t then t = tonumber(beat) end
      at, runAt = int(t), int(tonumber(ARGV[4]) + tonumber(ARGV[5]))
    end
    local rev = append(KEYS[1], KEYS[2], 'takeover', ARGV[1], now, 's', ARGV[3], 'f', from)
    redis.call('HSET', KEYS[5], 'owner', ARGV[1], 'state', 'held', 'at', at, 'runAt', runAt)
    redis.call('SREM', base_of(KEYS[1]) .. 'owned:' .. from, ARGV[3])
    redis.call('SADD', KEYS[6], ARGV[3])
    return {'TAKEN', rev, from, r[2] or 'live', tonumber(at), tonumber(runAt), r[5] or '', changes_of(KEYS[5], r[6])}
    """#)
}
