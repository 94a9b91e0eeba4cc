import CLibUV
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
        let failure = FailureBox<Failure>()
        let body = LoopThreadBody(name: name) { [self] in
            loopThread.store(UInt(pthread_self()), ordering: .releasing)
            do throws(Failure) {
                try prepare()
            } catch {
                failure.error = error
                ready.signal()
                return
            }
            ready.signal()
            run()
            finished()
        }
        // A joinable POSIX thread, not a Foundation `Thread`: `waitStopped()` joins it, so it
        // returns only once the thread has ended for good, its thread-local destructors (OpenSSL's,
        // the Swift runtime's) included. A process that exits right after (`exit()` runs OpenSSL's
        // clean-up at exit) then never races a thread still tearing itself down.
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setstacksize(&attributes, stackSize)
        var thread = pthread_t()
        let box = Unmanaged.passRetained(body).toOpaque()
        let result = pthread_create(&thread, &attributes, loopThreadMain, box)
        pthread_attr_destroy(&attributes)
        precondition(result == 0, "startThread: pthread_create failed (\(result))")
        joinable.withLock { $0 = .running(UInt(thread)) }
        ready.wait()
        if let error = failure.error { throw error }
    }

    /// Waits until the thread `startThread` began has ended, joining it (at once when there is
    /// none, or it was joined already). Any thread but the loop thread; concurrent callers all wait.
    public func waitStopped() {
        guard threadStarted.load(ordering: .acquiring) else { return }
        precondition(!isOnLoopThread, "waitStopped() must not be called on the loop thread")
        joinable.withLock { state in
            guard case .running(let bits) = state else { return }
            pthread_join(pthread_t(bits), nil)
            state = .joined
        }
    }

    /// True on the thread running this loop (inside an lws callback, a timer, a posted job).
    public var isOnLoopThread: Bool {
        let thread = loopThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_self(), pthread_t(thread)) != 0
    }

    /// When the runtime goes without `waitStopped()`: the thread is detached, so that it does not
    /// stay a zombie (the runtime may go on its own loop thread, at the end of the thread's work).
    func detachUnjoinedThread() {
        joinable.withLock { state in
            guard case .running(let bits) = state else { return }
            pthread_detach(pthread_t(bits))
            state = .joined
        }
    }
}

/// The loop thread of `startThread`: `running` until joined (or detached).
enum LoopThreadState: Sendable {
    case none
    case running(UInt)
    case joined
}

/// The error of `prepare`, written by the loop thread before the hand-over semaphore and read
/// by the starting thread after it.
private final class FailureBox<Failure: Error>: @unchecked Sendable {
    var error: Failure?
}

/// What `startThread` hands its thread (retained for it, released when the body returns).
private final class LoopThreadBody {
    let name: String
    let body: () -> Void
    init(name: String, body: @escaping () -> Void) {
        self.name = name
        self.body = body
    }
}

/// The entry of the loop thread (`pthread_create`).
private func loopThreadMain(_ raw: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let raw else { return nil }
    let thread = Unmanaged<LoopThreadBody>.fromOpaque(raw).takeRetainedValue()
    // Linux keeps at most 15 bytes of a thread's name (a longer one is refused).
    presence_name_this_thread(String(decoding: thread.name.utf8.prefix(15), as: UTF8.self))
    thread.body()
    return nil
}
