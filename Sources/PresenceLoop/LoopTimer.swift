import CLibWebSockets

/// A one-shot timer on the loop: an lws `sul` (sorted microsecond list entry) with a closure.
///
/// lws timers rather than uv timers: lws re-arms its own libuv timer only after its own callbacks,
/// so a `sul` that lws schedules for itself (`lws_set_timeout`, kills) during our timer's callback
/// is honoured at once. lws inserts a `sul` with a linear sorted insert, so keep few of them
/// armed (the shell has about five, never one per connection).
///
/// Loop thread only. The runtime keeps every timer alive until the loop has ended (lws keeps
/// a pointer to it while it is scheduled).
public final class LoopTimer {
    private let slot: UnsafeMutablePointer<lwss_timer_t>
    private unowned let runtime: LoopRuntime
    private let fire: () -> Void
    /// When it is due (µs, lws's clock), or nil when not scheduled.
    public private(set) var dueAt: Int64?

    init(runtime: LoopRuntime, fire: @escaping () -> Void) {
        self.runtime = runtime
        self.fire = fire
        slot = UnsafeMutablePointer<lwss_timer_t>.allocate(capacity: 1)
        slot.initialize(to: lwss_timer_t())
        slot.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        slot.deallocate()
    }

    public var isScheduled: Bool { dueAt != nil }

    /// Fires once after `microseconds` (at least 1), replacing any earlier schedule. Does nothing
    /// once the loop is shutting down.
    public func schedule(afterMicroseconds microseconds: Int64) {
        guard let context = runtime.liveContext else { return }
        let delay = max(1, microseconds)
        dueAt = lws_now_usecs() + delay
        lws_sul_schedule(context, 0, &slot.pointee.sul, loopTimerFired, delay)
    }

    public func cancel() {
        guard dueAt != nil else { return }
        dueAt = nil
        lws_sul_cancel(&slot.pointee.sul)
    }

    fileprivate func fired() {
        dueAt = nil
        fire()
    }
}

/// The C callback of every `LoopTimer`: the timer is found through the `sul`'s container.
private func loopTimerFired(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwss_timer_from_sul(sul)?.pointee.owner else { return }
    Unmanaged<LoopTimer>.fromOpaque(owner).takeUnretainedValue().fired()
}
