import CHiredis

/// A blocking `PING` on a connection of its own, for a process that has not started its loop yet
/// (`presence-server --storage redis` says at once that Redis is unreachable, instead of serving
/// nothing). Never call it on an event loop.
public enum RedisProbe {
    /// nil when Redis answered `PONG` within `timeoutMilliseconds`; else why not.
    public static func ping(_ endpoint: RedisEndpoint, timeoutMilliseconds: Int64) -> String? {
        let timeout = max(1, timeoutMilliseconds)
        let interval = timeval(tv_sec: Int(timeout / 1000), tv_usec: Int((timeout % 1000) * 1000))
        guard let context = redisConnectWithTimeout(endpoint.host, Int32(endpoint.port), interval) else {
            return "cannot allocate a Redis context"
        }
        defer { redisFree(context) }
        if context.pointee.err != 0 { return errorText(context) }
        _ = redisSetTimeout(context, interval)
        var argument: [CChar] = Array("PING".utf8CString)
        let reply: UnsafeMutableRawPointer? = argument.withUnsafeMutableBufferPointer { buffer in
            var argv: [UnsafePointer<CChar>?] = [UnsafePointer(buffer.baseAddress)]
            var lengths: [Int] = [4]
            return redisCommandArgv(context, 1, &argv, &lengths)
        }
        guard let reply else { return errorText(context) }
        defer { freeReplyObject(reply) }
        let object = reply.assumingMemoryBound(to: redisReply.self).pointee
        let text = object.str.map { String(cString: $0) } ?? ""
        if object.type == REDIS_REPLY_STATUS, text == "PONG" { return nil }
        return "Redis answered PING with \(text.isEmpty ? "reply type \(object.type)" : text)"
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
