import CHiredis
import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

struct LoopTimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// A libuv loop a test owns and runs in steps until what it waits for has happened.
final class TestLoop {
    let loop: UnsafeMutablePointer<uv_loop_t>
    private let tick: UnsafeMutablePointer<prs_timer>
    let clock = RedisMonotonicClock()

    init() {
        loop = prs_loop_create()!
        tick = prs_timer_create(loop, { _ in }, nil, nil)!
    }

    var now: Int64 { clock.milliseconds() }

    /// Runs the loop until `condition` holds (true) or `timeout` ms pass (false). A 10 ms tick
    /// keeps each step short even when nothing else is due.
    @discardableResult
    func run(until condition: () -> Bool, timeout: Int64 = 5000) -> Bool {
        let deadline = now + timeout
        while !condition() {
            if now >= deadline { return false }
            prs_timer_arm(tick, 10)
            uv_run(loop, UV_RUN_ONCE)
        }
        return true
    }

    /// Runs the loop for `milliseconds`.
    func run(for milliseconds: Int64) {
        let end = now + milliseconds
        run(until: { now >= end }, timeout: milliseconds + 1000)
    }

    /// Starts an asynchronous call and runs the loop until its completion has run.
    func wait<T>(_ what: String = "a reply", timeout: Int64 = 5000, _ start: (@escaping (T) -> Void) -> Void) throws -> T {
        var result: T?
        start { result = $0 }
        guard run(until: { result != nil }, timeout: timeout) else { throw LoopTimedOut(what: what) }
        return result!
    }

    /// Closes the tick, runs the loop until every handle is closed and closes it: 0 when nothing
    /// was left open (a connection that was not closed keeps its handles, and this returns UV_EBUSY).
    func destroy() -> Int32 {
        prs_timer_close(tick)
        // Every handle the test left open would make this run forever: bound it.
        let deadline = now + 5000
        while uv_loop_alive(loop) != 0 && now < deadline { uv_run(loop, UV_RUN_NOWAIT); usleep(1000) }
        if uv_loop_alive(loop) != 0 { return Int32(UV_EBUSY.rawValue) }
        return prs_loop_destroy(loop)
    }
}

/// Calls a loop API and unwraps its result, failing the test with Redis's error.
extension TestLoop {
    func call<T>(_ what: String = "a reply", timeout: Int64 = 5000,
                 _ start: (@escaping (Result<T, RedisError>) -> Void) -> Void) throws -> T {
        try wait(what, timeout: timeout, start).get()
    }
}
