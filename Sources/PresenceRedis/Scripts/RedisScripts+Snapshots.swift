extension RedisScripts {
    /// SNAP_BEGIN: claims (or renews) the snapper lease and starts a snapshot at `rev`, which must
    /// be newer than the current snapshot and not past the head. A partial snapshot left by an
    /// earlier attempt at another rev is deleted.
    /// KEYS: head, snapper. ARGV: node id, epoch, rev, lease ms.
    /// -> {'OK'} | {'BUSY', holder} | {'STALE', snap rev, head rev} | {'EPOCH', current}
    public static let snapshotBegin = RedisScript(name: "snap_begin", source: prelude + #"""
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'rev', 'snap', 'pending')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    local holder = redis.call('GET', KEYS[2])
    if holder and holder ~= ARGV[1] then return {'BUSY', holder} end
    local rev = tonumber(ARGV[3])
    if rev <= tonumber(h[3] or '0') or rev > tonumber(h[2] or '0') then
      return {'STALE', tonumber(h[3] or '0'), tonumber(h[2] or '0')}
    end
    if h[4] and h[4] ~= ARGV[3] then redis.call('UNLINK', base_of(KEYS[1]) .. 'snap:' .. h[4]) end
    redis.call('HSET', KEYS[1], 'pending', ARGV[3])
    redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4])
    return {'OK'}
    """#)

    /// SNAP_CHUNKS: stores chunks of the snapshot being written, only while the caller still holds
    /// the snapper lease for it (a stale snapper cannot recreate a deleted partial snapshot).
    /// KEYS: head, snapper, snapshot hash. ARGV: node id, rev, then chunk id, bytes, ...
    /// -> {'OK'} | {'LOST'}
    public static let snapshotChunks = RedisScript(name: "snap_chunks", source: prelude + #"""
    if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {'LOST'} end
    if redis.call('HGET', KEYS[1], 'pending') ~= ARGV[2] then return {'LOST'} end
    for i = 3, #ARGV - 1, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
    return {'OK'}
    """#)

    /// SNAP_DONE: publishes the snapshot: `head.snap = rev`, the previous one stays as `prev` (a
    /// node may still be loading it) and the one before is deleted; the log is trimmed below
    /// `min(trimBelow, rev + 1)`, never past the new snapshot, and `head.min` becomes the oldest
    /// revision actually kept. The chunk count goes into the snapshot as `.count`, so a loader can
    /// tell a complete read from one cut short by a deletion.
    /// KEYS: head, snapper, log, snapshot hash. ARGV: node id, epoch, rev, trimBelow, chunk count.
    /// -> {'OK', min} | {'LOST'} | {'EPOCH', current}
    public static let snapshotDone = RedisScript(name: "snap_done", source: prelude + #"""
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'pending', 'snap', 'prev', 'rev', 'min')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if redis.call('GET', KEYS[2]) ~= ARGV[1] or h[2] ~= ARGV[3] then return {'LOST'} end
    redis.call('HSET', KEYS[4], '.count', ARGV[5])
    if h[4] and h[4] ~= '0' then redis.call('UNLINK', base_of(KEYS[1]) .. 'snap:' .. h[4]) end
    redis.call('HSET', KEYS[1], 'snap', ARGV[3], 'prev', h[3] or '0')
    redis.call('HDEL', KEYS[1], 'pending')
    local trim = math.min(tonumber(ARGV[4]), tonumber(ARGV[3]) + 1)
    local min = tonumber(h[6] or '1')
    if trim > min then
      redis.call('XTRIM', KEYS[3], 'MINID', '~', int(trim))
      local first = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)
      if first[1] then
        min = tonumber(string.match(first[1][1], '^(%d+)'))
      else
        min = tonumber(h[5]) + 1
      end
      redis.call('HSET', KEYS[1], 'min', int(min))
    end
    return {'OK', min}
    """#)
}
