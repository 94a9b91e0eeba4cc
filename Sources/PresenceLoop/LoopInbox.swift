import CLibWebSockets
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Work handed to the loop by other threads (the storage thread's "durable up to N", a cluster
/// link's replies): queued under a lock, and the loop woken with `lws_cancel_service`, which lws
/// answers on the loop thread with `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
///
/// The wake is made after the lock is released, and only when none is pending (the loop takes
/// every job queued by then). Woken inside the lock, the loop (which asks for a short time slice)
/// preempted the poster at once and then slept on the lock the poster still held: two context
/// switches and a loop asleep per post, measured under `bench/attack.sh`'s slow readers.
/// A producer still never wakes a destroyed context: it counts itself in `wakers` under the lock,
/// and `close` (under the same lock, before the context is destroyed) waits for the count to drain.
/// Jobs posted after `close` are dropped (the loop is going away).
final class LoopInbox: Sendable {
    private struct ContextRef: @unchecked Sendable { let raw: OpaquePointer }
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var context: ContextRef?
        /// A wake was sent that the loop has not answered with `take` yet.
        var wakePending = false
    }

    private let state = Mutex(State())
    /// Producers between deciding to wake (under the lock) and having woken.
    private let wakers = Atomic<Int>(0)

    /// Any thread.
    func post(_ job: @escaping @Sendable () -> Void) {
        let context = state.withLock { state -> ContextRef? in
            guard state.context != nil else { return nil }
            state.jobs.append(job)
            return claimWake(&state)
        }
        if let context { wake(context) }
    }

    /// Any thread: wake the loop with nothing to run (its wake handler checks its flags). Always
    /// a wake of its own: a pending one may be answered already past the flags it must see.
    func wake() {
        if let context = state.withLock({ claimWake(&$0, always: true) }) { wake(context) }
    }

    /// Under the lock: the context to wake, unless a wake for the jobs is already on its way.
    private func claimWake(_ state: inout State, always: Bool = false) -> ContextRef? {
        guard let context = state.context, always || !state.wakePending else { return nil }
        state.wakePending = true
        wakers.add(1, ordering: .acquiringAndReleasing)
        return context
    }

    private func wake(_ context: ContextRef) {
        lws_cancel_service(context.raw)
        wakers.subtract(1, ordering: .acquiringAndReleasing)
    }

    /// Loop thread: the jobs posted so far, in order. A post after this wakes the loop again.
    func take() -> [@Sendable () -> Void] {
        state.withLock { state in
            state.wakePending = false
            defer { state.jobs = [] }
            return state.jobs
        }
    }

    func open(_ context: OpaquePointer) {
        state.withLock { $0.context = ContextRef(raw: context) }
    }

    /// Loop thread, before the context is destroyed: no more wakes (those on their way finish
    /// first), pending jobs dropped.
    func close() {
        state.withLock { state in
            state.context = nil
            state.jobs = []
        }
        while wakers.load(ordering: .acquiring) > 0 { sched_yield() }
    }
}
