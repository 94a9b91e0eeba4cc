import CLibWebSockets

/// A timer on a ``LoopRuntime``'s loop (an lws `sul` with a pointer back to this object). It fires
/// once per ``schedule(afterMicroseconds:)``, on the service thread; re-schedule from `fire` to
/// repeat. Service thread only; keep it alive while it is scheduled.
///
/// lws inserts timers with a linear sorted walk, so owners keep a few of these, never one per
/// connection.
public final class LoopTimer {
    private let runtime: LoopRuntime
    private let timer: UnsafeMutablePointer<lwss_timer_t>
    private let fire: () -> Void

    public init(runtime: LoopRuntime, fire: @escaping () -> Void) {
        self.runtime = runtime
        self.fire = fire
        timer = .allocate(capacity: 1)
        timer.initialize(to: lwss_timer_t())
        timer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        if runtime.context != nil { lws_sul_cancel(&timer.pointee.sul) }
        timer.deallocate()
    }

    /// Fires once after `microseconds` (replacing an earlier schedule). Nothing while the context
    /// does not exist.
    public func schedule(afterMicroseconds microseconds: UInt64) {
        guard let context = runtime.context else { return }
        lws_sul_schedule(context, 0, &timer.pointee.sul, loopTimerCallback, lws_usec_t(max(1, microseconds)))
    }

    /// Takes the timer off the loop if it is scheduled.
    public func cancel() {
        guard runtime.context != nil else { return }
        lws_sul_cancel(&timer.pointee.sul)
    }

    fileprivate func fired() { fire() }
}

private func loopTimerCallback(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let timer = lwss_timer_from_sul(sul), let owner = timer.pointee.owner else { return }
    Unmanaged<LoopTimer>.fromOpaque(owner).takeUnretainedValue().fired()
}
