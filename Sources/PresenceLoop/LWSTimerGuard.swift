import CLibUV

/// Keeps lws's libuv timer from busy-waiting (see `presence_lws_timer_guarded` in the CLibUV
/// shim): lws 4.1 arms its one timer for its first `sul` rounded to the nearest millisecond, so a
/// `sul` due within half a millisecond is armed for 0 ms, and libuv 1.44 fires it again and again
/// within the same pass until it is due, without polling for I/O. Measured before the guard
/// (`docs/robustness.md`, "The loop's own pauses"): loop turns of 0.5–0.75 ms during a big read
/// answered in slices, a fifth of the server's CPU in `clock_gettime`.
///
/// lws's timer is the timer handle that appeared on the loop when lws joined it. Each turn,
/// before the poll, the guard is put back around lws's callback when lws re-armed the timer with
/// its own; the guarded callback re-arms a 0 ms timer for 1 ms. Loop thread only.
final class LWSTimerGuard {
    private var timers: [UnsafeMutablePointer<uv_timer_t>] = []

    /// lws's timers: those on `loop` now that were not before lws joined it (`timers(on:)`).
    init(loop: UnsafeMutablePointer<uv_loop_t>, before: [UnsafeMutablePointer<uv_timer_t>]) {
        timers = Self.timers(on: loop).filter { !before.contains($0) }
    }

    /// The timer handles on `loop`.
    static func timers(on loop: UnsafeMutablePointer<uv_loop_t>) -> [UnsafeMutablePointer<uv_timer_t>] {
        LoopHandles.find(on: loop, type: UV_TIMER).map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: uv_timer_t.self) }
    }

    /// How many timer handles lws has on the loop (1 with lws 4.1).
    var timerCount: Int { timers.count }

    /// Once per turn, before the loop polls.
    func guardTimers() {
        for timer in timers { presence_lws_timer_guard(timer) }
    }
}
