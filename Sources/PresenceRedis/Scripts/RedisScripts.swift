/// The Lua scripts of the scale-out design (docs/scaling.md, "Scripts"). Each one is atomic in
/// Redis and touches only keys of one namespace (`{ns}` hash tag). Conventions:
///
/// - KEYS[1] is always the namespace's `head`; per-session and per-node keys are derived from it
///   (same hash tag, so the same slot).
/// - Every script that changes anything first checks the log's `epoch` (a Redis that came back
///   empty or from another history answers `EPOCH`) and the caller's lease (a node whose lease has
///   expired answers `FENCED` and can never act again under that id).
/// - Times that decide liveness are Redis `TIME`; session times (`at`, `runAt`) are the calling
///   node's clock, as the engine's `now`.
/// - Reads and checks come first, then the log append (which undoes its revision if `XADD`
///   fails), then the other writes: a failed script leaves no revision without its entry.
/// - Replies are arrays whose first element is a status word.
public enum RedisScripts {
    static let prelude = #"""
    local function now_ms()
      local t = redis.call('TIME')
      return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local function int(v) return string.format('%d', v) end
    local function base_of(head) return string.sub(head, 1, #head - 4) end
    local function alive(nodes, node, lease, now)
      local beat = redis.call('HGET', nodes, node)
      return beat and now - tonumber(beat) <= tonumber(lease)
    end
    local function append(head, log, kind, node, now, ...)
      local rev = redis.call('HINCRBY', head, 'rev', 1)
      local ok = redis.pcall('XADD', log, int(rev) .. '-0', 'k', kind, 'n', node, 't', int(now), ...)
      if type(ok) == 'table' and ok.err then
        redis.call('HINCRBY', head, 'rev', -1)
        return error(ok.err)
      end
      return rev
    end
    -- A session record's changes since its last whole put: fields c1..cn, in order.
    local function changes_of(key, n)
      local out = {}
      for i = 1, tonumber(n or '0') do
        local c = redis.call('HGET', key, 'c' .. i)
        if c then table.insert(out, c) end
      end
      return out
    end

    """#

    /// CREATE: starts a namespace's log.
    /// KEYS: head, log. ARGV: epoch, lease ms.
    /// -> {'CREATED', epoch, 0} | {'EXISTS', epoch, rev} | {'ORPHAN_LOG'} (a log without a head:
    /// the head was deleted by hand; an operator must decide).
    public static let create = RedisScript(name: "create", source: prelude + #"""
    local e = redis.call('HGET', KEYS[1], 'epoch')
    if e then return {'EXISTS', e, tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')} end
    if redis.call('EXISTS', KEYS[2]) == 1 then return {'ORPHAN_LOG'} end
    redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'rev', 0, 'lease', ARGV[2], 'snap', 0, 'prev', 0, 'min', 1)
    return {'CREATED', ARGV[1], 0}
    """#)

    /// SEQ: orders one step. Checks the epoch, the proposer's lease and, when the step claims a
    /// session, that the proposer owns it; then `rev = HINCRBY`, `XADD <rev>-0`. Claim `run`
    /// (running a session's held onDisconnect ops) also deletes the session record.
    /// KEYS: head, log, nodes, session record (or the unused `s:` key), owned set of the proposer.
    /// ARGV: node, epoch, payload, claim ('' | 'own' | 'run'), session id.
    /// -> {'OK', rev, redis ms} | {'EPOCH', current} | {'FENCED'} | {'NOT_OWNER', owner}
    public static let sequence = RedisScript(name: "seq", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[3], ARGV[1], h[2], now) then return {'FENCED'} end
    if ARGV[4] ~= '' then
      local owner = redis.call('HGET', KEYS[4], 'owner')
      if owner ~= ARGV[1] then return {'NOT_OWNER', owner or ''} end
    end
    local rev = append(KEYS[1], KEYS[2], 'p', ARGV[1], now, 'e', ARGV[3])
    if ARGV[4] == 'run' then
      redis.call('DEL', KEYS[4])
      redis.call('SREM', KEYS[5], ARGV[5])
    end
    return {'OK', rev, now}
    """#)

    /// JOIN: registers a node incarnation in the lease table. Other incarnations of the same node
    /// name (`<name>#...`) are declared dead at once: a restarted node's sessions go to the reaper
    /// now, not after a lease. Repeating a join that succeeded is a beat.
    /// KEYS: head, log, nodes, down. ARGV: node id, epoch, node name.
    /// -> {'OK', redis ms, lease ms, {replaced ids}} | {'EPOCH', current} | {'EXPIRED'} | {'DEAD'}
    public static let join = RedisScript(name: "join", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return {'DEAD'} end
    local beat = redis.call('HGET', KEYS[3], ARGV[1])
    local replaced = {}
    if beat then
      if now - tonumber(beat) > tonumber(h[2]) then return {'EXPIRED'} end
    else
      local prefix = ARGV[3] .. '#'
      local all = redis.call('HGETALL', KEYS[3])
      for i = 1, #all, 2 do
        if string.sub(all[i], 1, #prefix) == prefix then
          append(KEYS[1], KEYS[2], 'dead', ARGV[1], now, 'd', all[i], 'b', all[i + 1])
          redis.call('HDEL', KEYS[3], all[i])
          redis.call('HSET', KEYS[4], all[i], all[i + 1])
          table.insert(replaced, all[i])
        end
      end
    end
    redis.call('HSET', KEYS[3], ARGV[1], int(now))
    return {'OK', now, tonumber(h[2]), replaced}
    """#)

    /// BEAT: renews the caller's lease. An expired lease is never renewed: the node must stop
    /// (it has fenced itself by then) and rejoin as a new incarnation. `reap` (0|1) says whether
    /// REAP has work: a lease in the table expired, or a node in `down` waits for adoption; the
    /// node reaps only then, so a quiet namespace costs one script call per beat, not two.
    /// KEYS: head, nodes, down. ARGV: node id, epoch.
    /// -> {'OK', redis ms, head rev, reap} | {'EPOCH', current} | {'EXPIRED', last beat} | {'UNKNOWN'}
    public static let beat = RedisScript(name: "beat", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease', 'rev')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    local beat = redis.call('HGET', KEYS[2], ARGV[1])
    if not beat then return {'UNKNOWN'} end
    if now - tonumber(beat) > tonumber(h[2]) then return {'EXPIRED', tonumber(beat)} end
    redis.call('HSET', KEYS[2], ARGV[1], int(now))
    local reap = 0
    if redis.call('HLEN', KEYS[3]) > 0 then
      reap = 1
    else
      local all = redis.call('HGETALL', KEYS[2])
      for i = 1, #all, 2 do
        if now - tonumber(all[i + 1]) > tonumber(h[2]) then reap = 1 break end
      end
    end
    return {'OK', now, tonumber(h[3]), reap}
    """#)

    /// LEAVE: a graceful stop. The node leaves the lease table for `down`, with `now` as the time
    /// its live sessions count as disconnected; survivors adopt them at their next reap.
    /// KEYS: head, log, nodes, down. ARGV: node id, epoch, now (node ms).
    /// -> {'OK', rev} | {'EPOCH', current} | {'FENCED'}
    public static let leave = RedisScript(name: "leave", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[3], ARGV[1], h[2], now) then return {'FENCED'} end
    local rev = append(KEYS[1], KEYS[2], 'leave', ARGV[1], now, 'b', ARGV[3])
    redis.call('HDEL', KEYS[3], ARGV[1])
    redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
    return {'OK', rev}
    """#)

    /// REAP: moves every node whose lease expired to `down` (one `dead` log entry each, carrying its
    /// last beat), then adopts up to `batch` sessions of down nodes for the caller: each becomes
    /// `held` by the caller; a live one counts as disconnected at the down time (the last beat)
    /// and runs after the grace window from `now`; a held one keeps its times. A down node with
    /// nothing left to adopt is forgotten. More batches follow in later calls.
    /// KEYS: head, log, nodes, down, owned set of the caller.
    /// ARGV: node id, epoch, now (node ms), grace ms, batch.
    /// -> {'OK', {dead id, last beat, ...}, {{sid, from, state, at, runAt, ops, {changes}}, ...}, more (0|1)}
    ///    | {'EPOCH', current} | {'FENCED'}
    public static let reap = RedisScript(name: "reap", source: prelude + #"""
    local now = now_ms()
    local h = redis.call('HMGET', KEYS[1], 'epoch', 'lease')
    if h[1] ~= ARGV[2] then return {'EPOCH', h[1] or ''} end
    if not alive(KEYS[3], ARGV[1], h[2], now) then return {'FENCED'} end
    local lease = tonumber(h[2])
    local base = base_of(KEYS[1])
    local dead = {}
    local all = redis.call('HGETALL', KEYS[3])
    for i = 1, #all, 2 do
      if now - tonumber(all[i + 1]) > lease then
        append(KEYS[1], KEYS[2], 'dead', ARGV[1], now, 'd', all[i], 'b', all[i + 1])
        redis.call('HDEL', KEYS[3], all[i])
        redis.call('HSET', KEYS[4], all[i], all[i + 1])
        table.insert(dead, all[i])
        table.insert(dead, tonumber(all[i + 1]))
      end
    end
    local adopted = {}
    local budget = tonumber(ARGV[5])
    local liveRunAt = int(tonumber(ARGV[3]) + tonumber(ARGV[4]))
    local more = 0
    local downs = redis.call('HGETALL', KEYS[4])
    for i = 1, #downs, 2 do
      local gone, last = downs[i], downs[i + 1]
      local owned = base .. 'owned:' .. gone
      if budget > 0 then
        local sids = redis.call('SPOP', owned, budget)
        for _, sid in ipairs(sids) do
          budget = budget - 1
          local key = base .. 's:' .. sid
          local r = redis.call('HMGET', key, 'owner', 'state', 'at', 'runAt', 'ops', 'n')
          if r[1] == gone then
            local at, runAt = r[3] or last, r[4] or liveRunAt
            if r[2] ~= 'held' then at, runAt = last, liveRunAt end
            redis.call('HSET', key, 'owner', ARGV[1], 'state', 'held', 'at', at, 'runAt', runAt)
            redis.call('SADD', KEYS[5], sid)
            table.insert(adopted, {sid, gone, r[2] or 'live', tonumber(at), tonumber(runAt), r[5] or '', changes_of(key, r[6])})
          end
        end
      end
      if redis.call('EXISTS', owned) == 0 then
        redis.call('HDEL', KEYS[4], gone)
      else
        more = 1
      end
    end
    return {'OK', dead, adopted, more}
    """#)

    /// Every script, for `RedisConnection.register` (loaded on each new connection).
    public static let all: [RedisScript] = [
        create, sequence, join, beat, leave, reap, release, session, takeover, snapshotBegin, snapshotChunks, snapshotDone,
    ]
}
