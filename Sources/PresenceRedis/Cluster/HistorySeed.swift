import CHiredis

#if canImport(Glibc)
import Glibc
#endif

/// An operator's way back after Redis lost a namespace's history (`presence-server redis-seed`,
/// docs/scaling.md "Redis back empty, or with another history"): nodes that remember the lost
/// history refuse the namespace until Redis holds a history an operator accepted. SEED either
/// starts a new, empty history (`empty`), or accepts the history Redis holds now (`existing`:
/// one a node without memory created meanwhile), and marks it `seeded` (Redis ms) in the head.
/// Blocking, on a connection of its own: a command-line tool, never on an event loop.
public enum HistorySeed {
    public enum Mode: String, Sendable {
        /// No history in Redis: create a new, empty one, accepted.
        case empty
        /// A history in Redis: accept it as the namespace's.
        case existing
    }

    public enum Outcome: Sendable, Equatable {
        /// A new, empty history, accepted.
        case seeded(epoch: String)
        /// The history Redis holds is accepted now.
        case accepted(epoch: String, rev: UInt64)
        /// `empty`, but Redis holds a history (`seeded`: accepted earlier): nothing done.
        case exists(epoch: String, rev: UInt64, seeded: Bool)
        /// `existing`, but Redis holds no history: nothing done.
        case absent
        /// A log without its head (deleted by hand): nothing done, an operator must decide.
        case orphanLog
    }

    /// SEED. KEYS: head, log. ARGV: new epoch, lease ms, mode.
    /// -> {'SEEDED', epoch} | {'ACCEPTED', epoch, rev} | {'EXISTS', epoch, rev, seeded} | {'ABSENT'} | {'ORPHAN_LOG'}
    static let script = RedisScript(name: "seed", source: RedisScripts.prelude + #"""
    local e = redis.call('HGET', KEYS[1], 'epoch')
    if e then
      local rev = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
      if ARGV[3] == 'existing' then
        redis.call('HSET', KEYS[1], 'seeded', now_ms())
        return {'ACCEPTED', e, rev}
      end
      return {'EXISTS', e, rev, redis.call('HGET', KEYS[1], 'seeded') or ''}
    end
    if redis.call('EXISTS', KEYS[2]) == 1 then return {'ORPHAN_LOG'} end
    if ARGV[3] ~= 'empty' then return {'ABSENT'} end
    redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'rev', 0, 'lease', ARGV[2], 'snap', 0, 'prev', 0, 'min', 1, 'seeded', now_ms())
    return {'SEEDED', ARGV[1]}
    """#)

    /// Runs SEED for `keys`; the outcome, or why Redis could not be asked.
    public static func seed(_ endpoint: RedisEndpoint, keys: RedisKeys, mode: Mode, leaseMilliseconds: Int64,
                            timeoutMilliseconds: Int64) -> Result<Outcome, RedisError> {
        let arguments = ["EVAL", script.source, "2", keys.head, keys.log, NodeIdentity.randomEpoch(), String(leaseMilliseconds), mode.rawValue]
        let reply: RedisReply
        switch call(endpoint, arguments, timeoutMilliseconds: timeoutMilliseconds) {
        case .success(let value): reply = value
        case .failure(let error): return .failure(error)
        }
        let fields = reply.array ?? []
        func text(_ i: Int) -> String? { i < fields.count ? fields[i].string : nil }
        func number(_ i: Int) -> UInt64 { UInt64(max(0, i < fields.count ? fields[i].integer ?? 0 : 0)) }
        switch text(0) {
        case "SEEDED"?: if let epoch = text(1) { return .success(.seeded(epoch: epoch)) }
        case "ACCEPTED"?: if let epoch = text(1) { return .success(.accepted(epoch: epoch, rev: number(2))) }
        case "EXISTS"?: if let epoch = text(1) { return .success(.exists(epoch: epoch, rev: number(2), seeded: !(text(3) ?? "").isEmpty)) }
        case "ABSENT"?: return .success(.absent)
        case "ORPHAN_LOG"?: return .success(.orphanLog)
        default: break
        }
        return .failure(.unexpectedReply("SEED: \(reply)"))
    }

    /// One command on a blocking connection of its own.
    static func call(_ endpoint: RedisEndpoint, _ arguments: [String], timeoutMilliseconds: Int64) -> Result<RedisReply, RedisError> {
        let timeout = max(1, timeoutMilliseconds)
        let interval = timeval(tv_sec: Int(timeout / 1000), tv_usec: Int((timeout % 1000) * 1000))
        guard let context = redisConnectWithTimeout(endpoint.host, Int32(endpoint.port), interval) else {
            return .failure(.notSent("cannot allocate a Redis context"))
        }
        defer { redisFree(context) }
        if context.pointee.err != 0 { return .failure(.notSent(errorText(context))) }
        _ = redisSetTimeout(context, interval)
        let copies = arguments.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        var argv: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
        var lengths: [Int] = arguments.map { $0.utf8.count }
        guard let raw = redisCommandArgv(context, Int32(arguments.count), &argv, &lengths) else {
            return .failure(.connectionLost(errorText(context))) // sent or not: the outcome is unknown
        }
        defer { freeReplyObject(raw) }
        let reply = RedisReply(UnsafePointer(raw.assumingMemoryBound(to: redisReply.self)))
        if case .error(let message) = reply { return .failure(.unexpectedReply(message)) }
        return .success(reply)
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
