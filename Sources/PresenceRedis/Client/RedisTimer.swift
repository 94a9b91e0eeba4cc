import CHiredis

/// A one-shot libuv timer on the connection's loop. It keeps itself (and what `fire` captures)
/// alive until `close()` has been called and libuv has released the handle.
final class RedisTimer {
    private var handle: UnsafeMutablePointer<prs_timer>?
    private let fire: () -> Void

    private init(fire: @escaping () -> Void) { self.fire = fire }

    static func make(loop: UnsafeMutablePointer<uv_loop_t>, fire: @escaping () -> Void) -> RedisTimer {
        let timer = RedisTimer(fire: fire)
        let owner = Unmanaged.passRetained(timer).toOpaque()
        guard let handle = prs_timer_create(loop, redisTimerFired, redisTimerReleased, owner) else {
            fatalError("libuv could not create a timer (out of memory)")
        }
        timer.handle = handle
        return timer
    }

    func arm(afterMilliseconds delay: Int64) {
        guard let handle else { return }
        prs_timer_arm(handle, UInt64(max(0, delay)))
    }

    func disarm() {
        guard let handle else { return }
        prs_timer_disarm(handle)
    }

    func close() {
        guard let handle else { return }
        self.handle = nil
        prs_timer_close(handle)
    }

    fileprivate func fired() { if handle != nil { fire() } }
}

private func redisTimerFired(_ owner: UnsafeMutableRawPointer?) {
    guard let owner else { return }
    Unmanaged<RedisTimer>.fromOpaque(owner).takeUnretainedValue().fired()
}

private func redisTimerReleased(_ owner: UnsafeMutableRawPointer?) {
    guard let owner else { return }
    Unmanaged<RedisTimer>.fromOpaque(owner).release()
}
