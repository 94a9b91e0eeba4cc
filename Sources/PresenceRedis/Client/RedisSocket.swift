import CHiredis

/// One hiredis context (one TCP connection attempt) of a `RedisConnection`. hiredis finds it
/// through `context.data`, which holds a retain on it until the adapter reports the context's
/// poll handle closed: by then hiredis has called every callback it ever will for this context,
/// so no callback can reach a freed socket (or, through it, a freed connection).
final class RedisSocket {
    let connection: RedisConnection
    /// Set once attached; never used after `ended`.
    private(set) var context: UnsafeMutablePointer<redisAsyncContext>?
    /// Commands written to this socket, in order, waiting for their replies.
    var inflight = CommandQueue()
    /// The connection has moved on: no more hiredis calls through this socket.
    var ended = false
    /// Why we ended it ourselves (hiredis's error text does not say "timed out").
    var dropReason: String?

    init(connection: RedisConnection) { self.connection = connection }

    /// Attaches a fresh context to the loop with our adapter and sets the callbacks. On failure
    /// the context is freed and nothing stays retained.
    func attach(_ context: UnsafeMutablePointer<redisAsyncContext>, loop: UnsafeMutablePointer<uv_loop_t>) -> Bool {
        let owner = Unmanaged.passRetained(self).toOpaque()
        context.pointee.data = owner
        guard prs_redis_attach(context, loop, redisSocketReleased, owner) == REDIS_OK else {
            redisAsyncFree(context)
            Unmanaged<RedisSocket>.fromOpaque(owner).release()
            return false
        }
        self.context = context
        redisAsyncSetConnectCallback(context, redisConnected)
        redisAsyncSetDisconnectCallback(context, redisDisconnected)
        return true
    }

    static func errorText(_ context: UnsafePointer<redisAsyncContext>) -> String? {
        prs_redis_error(context).map { String(cString: $0) }
    }

    static func from(_ context: UnsafePointer<redisAsyncContext>?) -> RedisSocket? {
        guard let data = context?.pointee.data else { return nil }
        return Unmanaged<RedisSocket>.fromOpaque(data).takeUnretainedValue()
    }
}

// hiredis callbacks: plain functions (C function pointers cannot capture), routed through `data`.

func redisReplyArrived(_ context: UnsafeMutablePointer<redisAsyncContext>?, _ reply: UnsafeMutableRawPointer?,
                       _ privdata: UnsafeMutableRawPointer?) {
    guard let context, let socket = RedisSocket.from(context) else { return }
    let converted = reply.map { RedisReply($0.assumingMemoryBound(to: redisReply.self)) }
    let error = converted == nil ? RedisSocket.errorText(context) : nil
    socket.connection.replyArrived(on: socket, id: UInt64(UInt(bitPattern: privdata)), reply: converted, contextError: error)
}

private func redisConnected(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let socket = RedisSocket.from(context) else { return }
    if status == REDIS_OK {
        socket.connection.tcpConnected(socket)
    } else {
        // hiredis frees the context right after this returns; it calls no disconnect callback.
        socket.connection.socketEnded(socket, reason: RedisSocket.errorText(context) ?? "connect failed")
    }
}

private func redisDisconnected(_ context: UnsafePointer<redisAsyncContext>?, _ status: Int32) {
    guard let context, let socket = RedisSocket.from(context) else { return }
    let reason = socket.dropReason ?? RedisSocket.errorText(context) ?? "Redis closed the connection"
    socket.connection.socketEnded(socket, reason: reason)
}

private func redisSocketReleased(_ owner: UnsafeMutableRawPointer?) {
    guard let owner else { return }
    Unmanaged<RedisSocket>.fromOpaque(owner).release()
}
