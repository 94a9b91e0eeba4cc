import Synchronization

/// Work posted to a ``LoopRuntime``'s loop from other threads, taken in order by the loop on its
/// next wake-up. Closed for good when the loop stops: later posts are dropped.
public final class LoopInbox<Job: Sendable>: Sendable {
    private struct State {
        var jobs: [Job] = []
        var closed = false
    }
    private let state = Mutex(State())
    private let runtime: LoopRuntime

    public init(runtime: LoopRuntime) { self.runtime = runtime }

    /// Queues `job` and wakes the loop. False (and the job dropped) once closed.
    @discardableResult
    public func post(_ job: Job) -> Bool {
        let queued = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.jobs.append(job)
            return true
        }
        if queued { runtime.wake() }
        return queued
    }

    /// The jobs posted since the last call, in order (loop side).
    public func take() -> [Job] {
        state.withLock { state in
            let jobs = state.jobs
            state.jobs.removeAll(keepingCapacity: true)
            return jobs
        }
    }

    /// Refuses every later post; returns what was still queued.
    @discardableResult
    public func close() -> [Job] {
        state.withLock { state in
            state.closed = true
            defer { state.jobs = [] }
            return state.jobs
        }
    }
}
