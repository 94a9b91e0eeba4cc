import CLibWebSockets
import Dispatch
import Foundation
import Glibc
import Synchronization

/// One libwebsockets context serviced by one dedicated thread: the part the client transport
/// (``WebSocketClient``) and the bench's echo server share.
///
/// It owns the thread, the context and its protocol table, the wake-up from other threads
/// (`lws_cancel_service`), the stop (under libuv a two-stage destroy: the first stage must run
/// inside the loop for `lws_service` to return) and the routing of lws callbacks and, under
/// libuv, of SIGINT/SIGTERM to its owner. The owner keeps its own per-connection state and
/// answers the callbacks.
///
/// Threading: ``start(_:)``, ``wake()``, ``requestStop()``, ``waitStopped()`` and
/// ``isOnServiceThread`` are safe from any thread; everything else, and every hook, runs on the
/// service thread.
public final class LoopRuntime: @unchecked Sendable {
    /// The lws event backend of the service thread.
    public enum EventLoop: Sendable {
        /// Scales to tens of thousands of sockets.
        case libuv
        /// lws's default `poll()`: O(#fds) per wake-up.
        case poll
    }

    /// What the owner decides when the runtime starts.
    public struct Setup {
        public var eventLoop: EventLoop = .libuv
        /// Name of the service thread (seen in `top -H`, debuggers).
        public var threadName = "lws"
        /// The protocol's name (lws matches it against `Sec-WebSocket-Protocol`).
        public var protocolName = "presence"
        /// Bytes of per-session data lws allocates for each connection (0: none).
        public var perSessionDataSize = 0
        /// Per-connection lws receive buffer; larger messages arrive in pieces.
        public var rxBufferSize = 1024
        /// lws log mask (`LLL_ERR | LLL_WARN` = 3).
        public var lwsLogLevel: Int32 = 3
        /// Fills in the rest of the creation info (port or `CONTEXT_PORT_NO_LISTEN`, timeouts,
        /// TLS, ...), on the service thread. Strings and policies it passes must outlive the
        /// context: take them from ``LoopRuntime/keep(_:)`` and ``LoopRuntime/keepRetryPolicy(ping:hangup:)``.
        public var configure: (LoopRuntime, inout lws_context_creation_info) -> Void = { _, _ in }
        /// Every lws callback except `EVENT_WAIT_CANCELLED`: (wsi, reason, per-session data, in, len).
        public var callback: (OpaquePointer, lws_callback_reasons, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int) -> Int32 = { _, _, _, _, _ in 0 }
        /// Once the context exists, before the loop runs: arm timers.
        public var onStart: () -> Void = {}
        /// After a ``LoopRuntime/wake()`` (also spurious ones): take what other threads posted.
        public var onWake: () -> Void = {}
        /// When the stop begins, inside the loop: cancel timers, stop accepting work.
        public var onStop: () -> Void = {}
        /// After the context is gone, still on the service thread: report what never finished.
        public var onExit: () -> Void = {}
        /// SIGINT and SIGTERM under libuv (lws installs watchers for them); nil runs the signal's
        /// default action (the process ends).
        public var onSignal: ((Int32) -> Void)? = nil

        public init() {}
    }

    private struct ContextRef: @unchecked Sendable { let raw: OpaquePointer }

    // Cross-thread state.
    private let liveContext = Mutex<ContextRef?>(nil)
    private let stopRequested = Atomic<Bool>(false)
    private let serviceThread = Atomic<UInt>(0)
    private let started = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    private let exitedFlag = Atomic<Bool>(false)

    // Service-thread state.
    private var setup = Setup()
    /// The context, while it exists (service thread only).
    public private(set) var context: OpaquePointer?
    /// True from the moment the stop began (service thread only).
    public private(set) var isStopping = false
    private var stopTimer: LoopTimer?
    private var protocols: UnsafeMutablePointer<lws_protocols>?
    /// Frees what ``keep(_:)`` and ``keepRetryPolicy(ping:hangup:)`` handed out.
    private var releases: [() -> Void] = []

    public init() {}

    /// Creates the context on a new service thread and returns once it runs; throws when lws
    /// could not create it.
    public func start(_ setup: Setup) throws(LoopRuntimeError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStarted }
        let ready = DispatchSemaphore(value: 0)
        let ok = Atomic<Bool>(false)
        let box = SetupBox(setup)
        let thread = Thread { [self] in
            serviceThread.store(UInt(pthread_self()), ordering: .releasing)
            let created = createContext(box.setup)
            ok.store(created, ordering: .releasing)
            ready.signal()
            if created { runLoop() }
            exitedFlag.store(true, ordering: .releasing)
            exited.signal()
        }
        thread.name = setup.threadName
        thread.stackSize = 1 << 20
        thread.start()
        ready.wait()
        guard ok.load(ordering: .acquiring) else {
            exited.wait()
            throw .contextCreationFailed
        }
    }

    /// Wakes the loop: ``Setup/onWake`` runs on the service thread soon. Any thread; harmless
    /// before the start and after the stop.
    public func wake() {
        liveContext.withLock { context in
            if let context { lws_cancel_service(context.raw) }
        }
    }

    /// Asks the loop to stop (any thread, also a signal watcher): what was posted before is still
    /// taken, then the stop begins. Connections still open end without close frames.
    public func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        wake()
    }

    /// Waits until the service thread has exited (at once when it never started). Not on the
    /// service thread.
    public func waitStopped() {
        guard started.load(ordering: .acquiring) else { return }
        precondition(!isOnServiceThread, "waitStopped() must not be called on the service thread")
        if !exitedFlag.load(ordering: .acquiring) {
            exited.wait()
            exited.signal()  // let other waiters through as well
        }
    }

    /// True on this runtime's service thread (inside a callback, for example).
    public var isOnServiceThread: Bool {
        let thread = serviceThread.load(ordering: .acquiring)
        return thread != 0 && pthread_equal(pthread_self(), pthread_t(thread)) != 0
    }

    /// A C string that lives as long as the context (for creation and connect info).
    public func keep(_ string: String) -> UnsafePointer<CChar> {
        let copy = strdup(string)!
        releases.append { free(copy) }
        return UnsafePointer(copy)
    }

    /// A retry and idle policy that lives as long as the context. lws applies its default
    /// (ping 300 s, hang up 310 s) to connections without one, and each such connection inserts
    /// a validity timer with a linear sorted walk over every pending timer: O(n^2) over n
    /// connects. A zeroed policy (0, 0) schedules no validity timer at all.
    public func keepRetryPolicy(ping: UInt16, hangup: UInt16) -> UnsafePointer<lws_retry_bo_t> {
        let policy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        policy.initialize(to: lws_retry_bo_t())
        policy.pointee.secs_since_valid_ping = ping
        policy.pointee.secs_since_valid_hangup = hangup
        releases.append { policy.deallocate() }
        return UnsafePointer(policy)
    }

    // MARK: service thread

    private func createContext(_ setup: Setup) -> Bool {
        self.setup = setup
        lws_set_log_level(setup.lwsLogLevel, nil)
        let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = keep(setup.protocolName)
        protocols[0].callback = loopRuntimeCallback
        protocols[0].per_session_data_size = setup.perSessionDataSize
        protocols[0].rx_buffer_size = setup.rxBufferSize
        self.protocols = protocols

        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        if setup.eventLoop == .libuv {
            // lws installs libuv watchers for SIGINT/SIGTERM (and SIGSEGV/SIGFPE/SIGHUP unless
            // told not to); route the first two to `onSignal`, leave crashes alone.
            info.options |= UInt64(LWS_SERVER_OPTION_LIBUV) | UInt64(LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN)
            info.signal_cb = loopRuntimeSignalCallback
        }
        setup.configure(self, &info)
        guard let created = lws_create_context(&info) else {
            freeAllocations()
            return false
        }
        context = created
        liveContext.withLock { $0 = ContextRef(raw: created) }
        setup.onStart()
        // Work posted before the context existed is picked up by this first wake-up.
        lws_cancel_service(created)
        return true
    }

    private func runLoop() {
        guard let running = context else { return }
        while !isStopping {
            if lws_service(running, 0) < 0 { break }
            // With libuv, lws_service only returns once the stage-1 destroy ran (beginStop), or
            // if something stopped the uv loop: either way, leave.
            if setup.eventLoop == .libuv { break }
        }
        liveContext.withLock { $0 = nil }
        isStopping = true
        lws_context_destroy(running)  // the final stage (the only one with poll)
        context = nil
        setup.onExit()
        freeAllocations()
        setup = Setup()  // the hooks hold their owner, which holds this runtime: let both go
    }

    fileprivate func dispatch(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                              _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED else { return setup.callback(wsi, reason, user, input, length) }
        if isStopping { return 0 }
        setup.onWake()
        if stopRequested.load(ordering: .acquiring) { beginStop() }
        return 0
    }

    private func beginStop() {
        guard !isStopping, let running = context else { return }
        isStopping = true
        liveContext.withLock { $0 = nil }
        setup.onStop()
        if setup.eventLoop == .libuv {
            // The event-library loop only returns when lws_context_destroy runs inside it.
            let timer = LoopTimer(runtime: self) { lws_context_destroy(running) }
            stopTimer = timer
            timer.schedule(afterMicroseconds: 1)
        }
    }

    fileprivate func signalReceived(_ signal: Int32) {
        if let onSignal = setup.onSignal {
            onSignal(signal)
        } else {
            Glibc.signal(signal, SIG_DFL)
            raise(signal)
        }
    }

    private func freeAllocations() {
        if let protocols { protocols.deinitialize(count: 2); protocols.deallocate() }
        protocols = nil
        for release in releases { release() }
        releases = []
        stopTimer = nil
    }
}

/// Errors of ``LoopRuntime/start(_:)``.
public enum LoopRuntimeError: Error, CustomStringConvertible {
    case contextCreationFailed
    case alreadyStarted

    public var description: String {
        switch self {
        case .contextCreationFailed: "lws_create_context failed"
        case .alreadyStarted: "already started"
        }
    }
}

/// Carries the setup (closures that only ever run on the service thread) onto that thread.
private struct SetupBox: @unchecked Sendable {
    let setup: LoopRuntime.Setup
    init(_ setup: LoopRuntime.Setup) { self.setup = setup }
}

/// The protocol callback: a global function so it converts to `@convention(c)`.
private func loopRuntimeCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                                 _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    return Unmanaged<LoopRuntime>.fromOpaque(raw).takeUnretainedValue().dispatch(wsi, reason, user, input, length)
}

/// libuv signal watcher callback: `event_lib_handle` is the `uv_signal_t`, whose first field
/// (`uv_handle_t.data`) lws sets to the context.
private func loopRuntimeSignalCallback(_ handle: UnsafeMutableRawPointer?, _ signal: Int32) {
    guard let handle, let context = handle.load(as: OpaquePointer?.self), let raw = lws_context_user(context) else { return }
    Unmanaged<LoopRuntime>.fromOpaque(raw).takeUnretainedValue().signalReceived(signal)
}
