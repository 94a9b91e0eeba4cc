import CLibWebSockets
import Glibc
import PresenceCore
import PresenceLoop
import Synchronization

/// A libwebsockets **client** transport: one lws context on a libuv loop serviced by one dedicated
/// thread (`PresenceLoop`'s `LoopRuntime`, the server's loop runtime, on a thread of its own),
/// many connections on it.
///
/// Threading contract:
/// * Every public method is thread-safe. Called on the service thread (e.g. from the handler) it
///   acts at once; called elsewhere it is posted to the loop (`LoopRuntime.post`).
/// * The handler runs on the service thread only. It must not block. Message bytes are borrowed.
/// * Connections are addressed by ``WebSocketConnectionID`` only; an id that has closed is ignored.
///
/// The parts: this file (lifecycle and the operations), `+Connecting` (the handshake queue),
/// `+Callbacks` (what lws reports: receiving, writing, closing), `+Closing` (clean closes, aborts
/// and the end of the loop), `ClientSocket` (one connection's state).
///
/// Notes on lws 4.1 behaviour (details in `bench/README.md`):
/// * lws masks client payloads in place, so every frame is copied into a scratch buffer
///   right before `lws_write`.
/// * lws answers server PINGs by itself when it reads them; ``pause(_:)`` stops reading, so a
///   paused connection answers no ping.
public final class WebSocketClient: @unchecked Sendable {
    /// Called on the service thread for every event.
    public typealias Handler = @Sendable (WebSocketClient, WebSocketClientEvent) -> Void

    public let configuration: WebSocketClientConfiguration
    let handler: Handler
    let runtime: LoopRuntime
    private let nextID = Atomic<UInt64>(1)
    private let started = Atomic<Bool>(false)
    let counters = WebSocketClientCounters()

    // MARK: loop-confined state (service thread only)

    var sockets: [WebSocketConnectionID: ClientSocket] = [:]
    var pending: [PendingConnect] = []
    var pendingHead = 0
    var inFlight = 0
    /// Connections whose close frame should start on the next wake-up (outside their callback).
    var closeNow: [WebSocketConnectionID] = []
    var closeNowHead = 0
    var closingInFlight = 0
    var retryPolicy: UnsafePointer<lws_retry_bo_t>?
    var localProtocolName: UnsafePointer<CChar>?
    var tickTimer: LoopTimer?
    /// `User-Agent: …\r\n`, appended to every handshake.
    let userAgentHeader: [UInt8]?
    var scratch: UnsafeMutablePointer<UInt8>
    var scratchCapacity: Int
    let pre = Int(lwss_pre())

    /// Creates a stopped client. Call ``start()`` before anything else.
    public init(configuration: WebSocketClientConfiguration = .init(), handler: @escaping Handler) throws(WebSocketClientError) {
        do {
            runtime = try LoopRuntime()
        } catch {
            throw .contextCreationFailed(error.description)
        }
        self.configuration = configuration
        self.handler = handler
        userAgentHeader = configuration.userAgent.map { Array("User-Agent: \($0)\r\n".utf8) }
        scratchCapacity = 64 * 1024
        scratch = .allocate(capacity: scratchCapacity)
    }

    deinit {
        scratch.deallocate()
    }

    var isStopping: Bool { runtime.isStopping }

    // MARK: lifecycle

    /// Creates the lws context on a new service thread and returns once it runs.
    public func start() throws(WebSocketClientError) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { throw .alreadyStarted }
        if configuration.raiseFileLimit { FileDescriptorLimit.raiseSoftToHard() }
        try runtime.startThread(name: "lws-client") { [self] () throws(WebSocketClientError) in
            try createContext()
        } finished: { [self] in
            reportUnfinished()
        }
    }

    /// Stops the loop and waits for the service thread to exit. Open connections are dropped
    /// without close frames (use ``close(_:code:)`` first for clean closes). Idempotent.
    public func shutdown() {
        precondition(!isOnServiceThread, "shutdown() must not be called on the service thread")
        // After what was posted before; lws's destroy begins inside the loop 1 µs later.
        runtime.requestStop(afterMicroseconds: 1)
        runtime.waitStopped()
    }

    /// True when called on this client's service thread (inside the handler, for example).
    public var isOnServiceThread: Bool { runtime.isOnLoopThread }

    /// A snapshot of the counters.
    public var statistics: WebSocketClientStatistics { counters.snapshot }

    // MARK: public operations (any thread)

    /// Opens a connection. Returns its id at once; ``WebSocketClientEvent/connected(_:)`` or
    /// ``WebSocketClientEvent/connectFailed(_:reason:)`` follows. At most
    /// ``WebSocketClientConfiguration/maxHandshakesInFlight`` handshakes run at a time; the rest wait.
    ///
    /// - Parameter sourceAddress: local IPv4 address to bind before connecting (e.g. `127.0.0.2`),
    ///   so that more than one ephemeral port range is available. Passed to lws as `iface`.
    @discardableResult
    public func connect(to url: WebSocketURL, sourceAddress: String? = nil) -> WebSocketConnectionID {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        counters.connectsRequested.wrappingAdd(1, ordering: .relaxed)
        submit(.connect(PendingConnect(id: id, url: url, sourceAddress: sourceAddress)))
        return id
    }

    /// Queues a text message. Frames queued before the handshake completes are sent after it.
    /// - Parameter fragmentSize: if set, the message goes out as WebSocket fragments of this size.
    public func send(_ id: WebSocketConnectionID, text: String, fragmentSize: Int? = nil) {
        send(id, bytes: Array(text.utf8), binary: false, fragmentSize: fragmentSize)
    }

    /// Queues a message of raw bytes (text unless `binary`).
    public func send(_ id: WebSocketConnectionID, bytes: [UInt8], binary: Bool = false, fragmentSize: Int? = nil) {
        submit(.send(id, bytes, binary: binary, fragment: fragmentSize ?? 0))
    }

    /// Closes cleanly: flushes queued messages, sends a close frame with `code`, waits for the
    /// peer's close frame (lws times out after 5 s).
    public func close(_ id: WebSocketConnectionID, code: CloseCode = .normal) {
        submit(.close(id, code))
    }

    /// Drops the TCP connection without a close frame. Queued messages are discarded.
    public func abort(_ id: WebSocketConnectionID, mode: WebSocketAbortMode = .fin) {
        submit(.abort(id, mode))
    }

    /// Stops reading (`lws_rx_flow_control(wsi, 0)`) and writing on a connection without closing
    /// it: lws then answers no PING either, so the peer sees a hung, half-open client. Sends are
    /// queued until ``resume(_:)``.
    public func pause(_ id: WebSocketConnectionID) { submit(.pause(id)) }

    /// Undoes ``pause(_:)``.
    public func resume(_ id: WebSocketConnectionID) { submit(.resume(id)) }

    /// Runs `body` on the service thread (inline when already on it).
    public func perform(_ body: @escaping @Sendable () -> Void) { submit(.perform(body)) }

    /// Closes every open or pending connection cleanly (see ``close(_:code:)``).
    public func closeAll(code: CloseCode = .normal) { submit(.closeAll(code)) }

    // MARK: jobs

    enum Job: Sendable {
        case connect(PendingConnect)
        case send(WebSocketConnectionID, [UInt8], binary: Bool, fragment: Int)
        case close(WebSocketConnectionID, CloseCode)
        case closeAll(CloseCode)
        case abort(WebSocketConnectionID, WebSocketAbortMode)
        case pause(WebSocketConnectionID)
        case resume(WebSocketConnectionID)
        case perform(@Sendable () -> Void)
    }

    struct PendingConnect: Sendable {
        let id: WebSocketConnectionID
        let url: WebSocketURL
        let sourceAddress: String?
    }

    private func submit(_ job: Job) {
        if isOnServiceThread, !isStopping, runtime.context != nil {
            execute(job)
        } else {
            runtime.post { [self] in execute(job) }
        }
    }

    /// The loop was woken (`EVENT_WAIT_CANCELLED`, also spurious ones): posted jobs run, then the
    /// close handshakes that wait for this wake-up start.
    func woken() {
        runtime.serviceWake()
        pumpCloses()
    }

    private func execute(_ job: Job) {
        switch job {
        case .connect(let p):
            if isStopping {
                failConnect(p.id, reason: "client shutting down")
            } else {
                pending.append(p)
                pumpConnects()
            }
        case .send(let id, let bytes, let binary, let fragment):
            guard let socket = sockets[id], !socket.closing, !socket.aborted else { return }
            socket.enqueue(bytes, binary: binary, fragment: fragment)
            if socket.established, !socket.paused, let wsi = socket.wsi { lws_callback_on_writable(wsi) }
        case .close(let id, let code):
            if let socket = sockets[id] { beginClose(socket, code: code) } else { removePending(id) }
        case .closeAll(let code):
            failAllPending(reason: "closed before connecting")
            for socket in Array(sockets.values) { beginClose(socket, code: code) }
        case .abort(let id, let mode):
            if let socket = sockets[id] { abortSocket(socket, mode: mode) } else { removePending(id) }
        case .pause(let id):
            guard let socket = sockets[id], let wsi = socket.wsi, !socket.paused else { return }
            socket.paused = true
            lws_rx_flow_control(wsi, 0)
        case .resume(let id):
            guard let socket = sockets[id], let wsi = socket.wsi, socket.paused else { return }
            socket.paused = false
            lws_rx_flow_control(wsi, 1)
            if socket.established, socket.hasQueuedFrames || socket.closing { lws_callback_on_writable(wsi) }
        case .perform(let body):
            body()
        }
    }

    // MARK: context (service thread)

    /// The lws context on the runtime's loop, no listening port; SIGINT/SIGTERM to the configured
    /// handler; the tick.
    private func createContext() throws(WebSocketClientError) {
        lws_set_log_level(configuration.lwsLogLevel, nil)
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = runtime.keepProtocol(name: "presence-client", callback: webSocketClientCallback,
                                              rxBufferSize: configuration.rxBufferSize)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        // Always pass a policy (see LoopRuntime.keepRetryPolicy): hang-up 0 schedules no
        // validity timer per connection.
        retryPolicy = runtime.keepRetryPolicy(ping: configuration.pingIntervalSeconds, hangup: configuration.hangupSeconds)
        localProtocolName = runtime.keep("presence-client")
        info.connect_timeout_secs = configuration.connectTimeoutSeconds
        info.timeout_secs = configuration.connectTimeoutSeconds
        // TLS for wss:// connections, verifying against the system's CAs or --ca-file.
        info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        if let caFile = configuration.caFile { info.client_ssl_ca_filepath = runtime.keep(caFile) }
        do {
            try runtime.createContext(&info)
        } catch {
            runtime.abandon()
            throw .contextCreationFailed(error.description)
        }
        if let onSignal = configuration.signalHandler { runtime.handleSignals([SIGINT, SIGTERM], onSignal) }
        startTicking()
    }

    /// Arms the periodic tick, once the context exists.
    private func startTicking() {
        guard configuration.tickIntervalMicroseconds > 0 else { return }
        let timer = runtime.makeTimer { [unowned self] in tick() }
        tickTimer = timer
        timer.schedule(afterMicroseconds: Int64(configuration.tickIntervalMicroseconds))
    }

    /// The periodic tick, re-armed each time.
    private func tick() {
        guard !isStopping else { return }
        handler(self, .tick(nowMicros: monotonicMicros()))
        if !isStopping { tickTimer?.schedule(afterMicroseconds: Int64(configuration.tickIntervalMicroseconds)) }
    }
}

/// The protocol callback: a global function so it converts to `@convention(c)`; the client is the
/// context's user pointer.
private func webSocketClientCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                                     _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    let client = Unmanaged<WebSocketClient>.fromOpaque(raw).takeUnretainedValue()
    if reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED {
        client.woken()
        return 0
    }
    return client.handle(wsi, reason, input, length)
}
