import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loop on a thread of its own: what the client transport and the bench's echo server use (the
/// server runs its loop on the main thread with `run()`).
extension LoopRuntime {
    /// Starts a thread that runs `prepare` (create the context, arm timers, `handleSignals`), then
    /// the loop until it has shut down, then `finished` (report what never finished), all on that
    /// thread. Returns once `prepare` has returned; when it throws, the loop does not run (lws
    /// may have left a half-destroyed context on it, see `abandon`) and its error is rethrown.
    ///
    /// Stop it with `requestStop` (any thread) or `shutdown(afterMicroseconds:)` (on the loop), then
    /// `waitStopped()`. Once per runtime.
    public func startThread<Failure: Error>(
        name: String, stackSize: Int = 1 << 20,
        prepare: @escaping () throws(Failure) -> Void, finished: @escaping () -> Void = {}
    ) throws(Failure) {
        precondition(!threadStarted.exchange(true, ordering: .acquiringAndReleasing), "startThread: once per runtime")
        let ready = DispatchSemaphore(value: 0)
        let work = ThreadWork<Failure>(prepare: prepare, finished: finished)
        let thread = Thread { [self] in
            loopThread.store(UInt(pthread_self()), ordering: .releasing)
            do throws(Failure) {
                try work.prepare()
            } catch {
                work.failure = error
                ready.signal()
                finishThread()
                return
            }
            ready.signal()
            run()
            work.finished()
            finishThread()
        }
        thread.name = name
        thread.stackSize = stackSize
        thread.start()
        ready.wait()
        if let failure = work.failure { throw failure }
    }

    /// Waits until the thread `startThread` began has finished (at once when there is none). Not
    /// on the loop thread.
    public func waitStopped() {
        guard threadStarted.load(ordering: .acquiring) else { return }
        precondition(!isOnLoopThread, "waitStopped() must not be called on the loop thread")
        guard !threadFinished.load(ordering: .acquiring) else { return }
        threadExited.wait()
        threadExited.signal()  // let other waiters through as well
    }

    /// True on the thread running this loop (inside an lws callback, a timer, a posted job).
    public var isOnLoopThread: Bool {
        let thread = loopThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_self(), pthread_t(thread)) != 0
    }

    private func finishThread() {
        threadFinished.store(true, ordering: .releasing)
        threadExited.signal()
    }
}

/// What `startThread` hands its thread: closures that only ever run there, and the error of
/// `prepare`, read by the starting thread after the hand-over semaphore.
private final class ThreadWork<Failure: Error>: @unchecked Sendable {
    let prepare: () throws(Failure) -> Void
    let finished: () -> Void
    var failure: Failure?

    init(prepare: @escaping () throws(Failure) -> Void, finished: @escaping () -> Void) {
        self.prepare = prepare
        self.finished = finished
    }
}
