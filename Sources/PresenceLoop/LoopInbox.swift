import CLibWebSockets
import Synchronization

/// Work handed to the loop by other threads (the storage thread's "durable up to N", a cluster
/// link's replies): queued under a lock, and the loop woken with `lws_cancel_service`, which lws
/// answers on the loop thread with `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
///
/// The wake happens while the lock is held, and the loop forgets the context under the same lock
/// before destroying it, so a producer can never wake a destroyed context. Jobs posted after that
/// are dropped (the loop is going away).
final class LoopInbox: Sendable {
    private struct ContextRef: @unchecked Sendable { let raw: OpaquePointer }
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var context: ContextRef?
    }

    private let state = Mutex(State())

    /// Any thread.
    func post(_ job: @escaping @Sendable () -> Void) {
        state.withLock { state in
            guard let context = state.context else { return }
            state.jobs.append(job)
            lws_cancel_service(context.raw)
        }
    }

    /// Any thread: wake the loop with nothing to run (its wake handler checks its flags).
    func wake() {
        state.withLock { state in
            if let context = state.context { lws_cancel_service(context.raw) }
        }
    }

    /// Loop thread: the jobs posted so far, in order.
    func take() -> [@Sendable () -> Void] {
        state.withLock { state in
            defer { state.jobs = [] }
            return state.jobs
        }
    }

    func open(_ context: OpaquePointer) {
        state.withLock { $0.context = ContextRef(raw: context) }
    }

    /// Loop thread, before the context is destroyed: no more wakes, pending jobs dropped.
    func close() {
        state.withLock { state in
            state.context = nil
            state.jobs = []
        }
    }
}
