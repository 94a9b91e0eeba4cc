import CLibUV
import CLibWebSockets
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One event loop per service thread: a libuv loop this runtime creates and owns, the lws context
/// that joins it as a "foreign" loop, timers, a cross-thread inbox, and the shutdown order.
///
/// Another event source (the scale-out's hiredis connections) shares the loop: it registers its
/// libuv handles on `uvLoop`, wraps the work its callbacks do in `dispatch(_:)`, and closes its
/// handles in an `onShutdown` hook. The runtime knows nothing about servers, protocols or sockets.
///
/// Lifecycle, all on one thread: `init`, `createContext` (lws starts listening), `run()` (returns
/// when everything on the loop is closed), and from inside the loop `shutdown(afterMicroseconds:)`.
/// The server runs it on its main thread; the client transport and the bench's echo server on a
/// thread of its own (`startThread`, `LoopThread.swift`), stopped from any thread with
/// `requestStop`.
///
/// Confinement: everything except `post`, `wake`, `wakeFromSignal`, `requestStop`, `waitStopped`
/// and `isOnLoopThread` is loop-thread only; hence `@unchecked Sendable`.
public final class LoopRuntime: @unchecked Sendable {
    public enum Failure: Error, CustomStringConvertible {
        case loop(String)
        case context
        public var description: String {
            switch self {
            case .loop(let message): return "cannot create the event loop: \(message)"
            case .context: return "libwebsockets could not create its context"
            }
        }
    }

    /// The libuv loop everything runs on. Handles added to it must be closed in an `onShutdown`
    /// hook, or `run()` never returns.
    public let uvLoop: UnsafeMutablePointer<uv_loop_t>
    /// lws writes nil here when it has destroyed the context (`info.pcontext`).
    private let contextSlot: UnsafeMutablePointer<OpaquePointer?>
    private let foreignLoops: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let inbox = LoopInbox()
    private var timers: [LoopTimer] = []
    private var shutdownHooks: [() -> Void] = []
    private var turnEndHooks: [() -> Void] = []
    private var turnEnd: UnsafeMutablePointer<uv_prepare_t>?
    private var shutdownTimer: LoopTimer?
    /// lws's libuv timer without its busy wait (`LWSTimerGuard`), from `createContext` on.
    private var lwsTimerGuard: LWSTimerGuard?
    /// How many lws timers the guard found on the loop (1 with lws 4.1; 0 before `createContext`).
    public var guardedLWSTimers: Int { lwsTimerGuard?.timerCount ?? 0 }
    /// Set when the context is being destroyed: timers and wakes stop.
    public private(set) var isShuttingDown = false
    private var loopClosed = false
    /// Memory lws keeps pointers to (`keep`, `LoopRuntime+Keep.swift`), freed with the runtime.
    var releases: [() -> Void] = []
    /// The libuv signal watchers (`handleSignals`), closed when the shutdown begins.
    var signalWatchers: [UnsafeMutablePointer<uv_signal_t>] = []
    /// The thread running the loop (`pthread_t` bits), 0 before `run()` or `startThread`.
    let loopThread = Atomic<UInt>(0)
    /// `startThread` was called.
    let threadStarted = Atomic<Bool>(false)
    /// `startThread`'s thread, until `waitStopped()` has joined it.
    let joinable = Mutex<LoopThreadState>(.none)
    /// A stop asked for from any thread (`requestStop`): its delay in µs, -1 while none.
    private let stopDelay = Atomic<Int64>(-1)
    /// The context signal handlers wake (`lws_cancel_service` is async-signal-safe).
    private static let signalContext = Atomic<UInt>(0)

    public init() throws(Failure) {
        // Fail before every stored property is set: a throw after that runs `deinit`, which would
        // close and free the loop that failed to open (it did, with too few file descriptors).
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        let result = uv_loop_init(loop)
        guard result == 0 else {
            loop.deallocate()
            throw .loop(String(cString: uv_strerror(result)))
        }
        uvLoop = loop
        contextSlot = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: 1)
        contextSlot.initialize(to: nil)
        foreignLoops = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
        foreignLoops.initialize(to: UnsafeMutableRawPointer(uvLoop))
    }

    deinit {
        detachUnjoinedThread()
        // Timers are freed only now: lws held pointers to them until the context was destroyed.
        timers.removeAll()
        if !loopClosed, contextSlot.pointee == nil { _ = uv_loop_close(uvLoop) }
        uvLoop.deallocate()
        contextSlot.deallocate()
        foreignLoops.deallocate()
        for release in releases { release() }
    }

    /// The lws context, until lws has destroyed it.
    public var context: OpaquePointer? { contextSlot.pointee }

    /// The context while it may still be used for new work (not shutting down).
    var liveContext: OpaquePointer? { isShuttingDown ? nil : contextSlot.pointee }

    /// Creates the lws context on this loop. `info` is used as given (protocols, vhost, TLS, user
    /// pointer); the runtime adds libuv, its loop and the slot lws clears on destruction.
    @discardableResult
    public func createContext(_ info: inout lws_context_creation_info) throws(Failure) -> OpaquePointer {
        info.options |= UInt64(LWS_SERVER_OPTION_LIBUV)
        info.foreign_loops = foreignLoops
        info.pcontext = contextSlot
        // On a foreign loop lws returns the context even when creating it failed: it has begun
        // destroying it, and may have freed it already, clearing the slot. A marker tells.
        contextSlot.pointee = OpaquePointer(bitPattern: 1)
        let timersBefore = LWSTimerGuard.timers(on: uvLoop)
        guard let context = lws_create_context(&info), contextSlot.pointee != nil else {
            contextSlot.pointee = nil
            throw .context
        }
        contextSlot.pointee = context
        let timerGuard = LWSTimerGuard(loop: uvLoop, before: timersBefore)
        lwsTimerGuard = timerGuard
        onTurnEnd { timerGuard.guardTimers() }
        inbox.open(context)
        // Jobs posted before the context existed were dropped; a stop asked for meanwhile is not.
        if stopDelay.load(ordering: .acquiring) >= 0 { lws_cancel_service(context) }
        return context
    }

    /// Startup failed after `createContext` (lws could not listen): stop using the loop, and do
    /// not run it. On that path lws 4.1.6 has already begun destroying the context and unloaded
    /// its libuv plugin while the plugin's handles are still on the loop: running the loop would
    /// call into unmapped code. The process is expected to exit.
    public func abandon() {
        isShuttingDown = true
        Self.signalContext.store(0, ordering: .releasing)
        inbox.close()
    }

    /// Makes this runtime's context the one `wakeFromSignal()` wakes (one per process).
    public func receiveSignals() {
        guard let context else { return }
        Self.signalContext.store(UInt(bitPattern: context), ordering: .releasing)
    }

    /// Async-signal-safe: wakes the loop of the runtime that called `receiveSignals()`. The wake
    /// handler then looks at the flags the signal handler set.
    public static func wakeFromSignal() {
        let bits = signalContext.load(ordering: .acquiring)
        if bits != 0, let context = OpaquePointer(bitPattern: bits) { lws_cancel_service(context) }
    }

    /// A timer on this loop (see `LoopTimer`). It lives as long as the runtime.
    public func makeTimer(_ fire: @escaping () -> Void) -> LoopTimer {
        let timer = LoopTimer(runtime: self, fire: fire)
        timers.append(timer)
        return timer
    }

    /// Any thread: run `job` on the loop soon, after the jobs posted before it. Dropped once the
    /// loop is shutting down.
    public func post(_ job: @escaping @Sendable () -> Void) {
        inbox.post(job)
    }

    /// Any thread: wake the loop (the owner's wake handler runs; see `serviceWake`).
    public func wake() {
        inbox.wake()
    }

    /// Any thread: `shutdown(afterMicroseconds:)` on the loop's next wake, after the jobs posted
    /// before. The owner's goodbyes belong in its own stop (the server closes its connections
    /// first); this is the plain stop of a loop on its own thread (`startThread`).
    public func requestStop(afterMicroseconds microseconds: Int64 = 1) {
        _ = stopDelay.compareExchange(expected: -1, desired: max(1, microseconds), ordering: .acquiringAndReleasing)
        inbox.wake()
    }

    /// Loop thread, from the lws callback on `LWS_CALLBACK_EVENT_WAIT_CANCELLED` (lws sends it to
    /// every protocol of every vhost, and sometimes for nothing: call it from one place, and expect
    /// empty drains): runs the posted jobs in order, then a stop `requestStop` asked for.
    public func serviceWake() {
        // The stop is read before the jobs are taken: every job posted before `requestStop` is then
        // in this take. Read after, a stop asked for while the jobs ran would cut off the jobs
        // posted between the take and the stop. A stop that arrives later wakes the loop again.
        let delay = stopDelay.load(ordering: .acquiring)
        for job in inbox.take() { job() }
        if delay >= 0 { shutdown(afterMicroseconds: delay) }
    }

    /// Loop thread: run work that a non-lws event source (a libuv handle of its own) triggered.
    /// Afterwards lws is woken once, so that lws timers scheduled meanwhile (`lws_set_timeout`,
    /// `LoopTimer`) are armed: lws re-arms its libuv timer only after its own callbacks.
    public func dispatch<T>(_ body: () throws -> T) rethrows -> T {
        defer { if let context = liveContext { lws_cancel_service(context) } }
        return try body()
    }

    /// Loop thread: `hook` runs once per turn of the loop, after everything the turn ran (events,
    /// posted jobs, timers) and before the loop waits for events again (a libuv prepare handle).
    /// Work that piles up during a turn is done there once: the outbound path sends each
    /// connection's frames of the turn in one write, storage gets the turn's changes with one
    /// wake-up. Hooks run in the order they were added, until the shutdown begins.
    public func onTurnEnd(_ hook: @escaping () -> Void) {
        turnEndHooks.append(hook)
        guard turnEnd == nil else { return }
        let handle = UnsafeMutablePointer<uv_prepare_t>.allocate(capacity: 1)
        handle.initialize(to: uv_prepare_t())
        uv_prepare_init(uvLoop, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_prepare_start(handle, loopTurnEnded)
        turnEnd = handle
    }

    fileprivate func turnEnded() {
        for hook in turnEndHooks { hook() }
    }

    /// Loop thread: `hook` runs when the shutdown begins, just before the lws context is destroyed.
    /// Another event source closes its handles there (disconnect, stop and close its polls and
    /// timers), or `run()` will not return.
    public func onShutdown(_ hook: @escaping () -> Void) {
        shutdownHooks.append(hook)
    }

    /// Loop thread: destroy the context after `microseconds` (time to flush goodbyes). Stage one of
    /// lws's destroy runs inside the loop; lws then closes its handles, and `run()` returns once
    /// nothing is left on the loop.
    public func shutdown(afterMicroseconds microseconds: Int64) {
        guard !isStopping else { return }
        let timer = makeTimer { [unowned self] in destroyContext() }
        shutdownTimer = timer
        timer.schedule(afterMicroseconds: microseconds)
    }

    /// True from the moment `shutdown(afterMicroseconds:)` was called: the owner takes no new work.
    public var isStopping: Bool { shutdownTimer != nil || isShuttingDown }

    private func destroyContext() {
        guard !isShuttingDown, let context = contextSlot.pointee else { return }
        isShuttingDown = true
        Self.signalContext.store(0, ordering: .releasing)
        inbox.close()
        for timer in timers { timer.cancel() }
        closeSignalWatchers()
        for hook in shutdownHooks { hook() }
        shutdownHooks = []
        // Last turn-end work (the goodbyes' frames), then the handle goes: the loop must empty.
        turnEnded()
        turnEndHooks = []
        if let handle = turnEnd {
            turnEnd = nil
            uv_prepare_stop(handle)
            handle.withMemoryRebound(to: uv_handle_t.self, capacity: 1) { uv_close($0, freeClosedHandle) }
        }
        lws_context_destroy(context)
    }

    /// Runs the loop on the calling thread until everything on it is closed (after `shutdown`).
    /// Returns 0, or the libuv error of closing a loop that still had handles.
    @discardableResult
    public func run() -> Int32 {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        // With a foreign loop lws finishes destroying inside the loop; this is for the case it
        // could not (it then needs a call from outside).
        if let context = contextSlot.pointee { lws_context_destroy(context) }
        let result = uv_loop_close(uvLoop)
        loopClosed = result == 0
        // The loop has ended: nothing fires any more. Let the timers and hooks go now, so that a
        // closure holding the runtime (a stop timer calling `shutdown`) does not keep it alive.
        timers.removeAll()
        turnEndHooks = []
        shutdownHooks = []
        return result
    }
}

/// The C callback of the turn-end prepare handle: the runtime is its `data`.
private func loopTurnEnded(_ handle: UnsafeMutablePointer<uv_prepare_t>?) {
    guard let data = handle?.pointee.data else { return }
    Unmanaged<LoopRuntime>.fromOpaque(data).takeUnretainedValue().turnEnded()
}

/// Frees a handle this file allocated, once libuv has closed it.
private func freeClosedHandle(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
    handle.map { UnsafeMutableRawPointer($0).deallocate() }
}
