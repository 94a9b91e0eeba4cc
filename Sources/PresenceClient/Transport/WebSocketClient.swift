import CLibWebSockets
import Dispatch
import Foundation
import Glibc
import Synchronization

/// A libwebsockets **client** transport: one lws context serviced by one dedicated thread, many
/// connections on it.
///
/// Threading contract:
/// * Every public method is thread-safe. Called on the service thread (e.g. from the handler) it
///   acts at once; called elsewhere it is queued in a `Mutex` inbox and the loop is woken with
///   `lws_cancel_service`.
/// * The handler runs on the service thread only. It must not block. Message bytes are borrowed.
/// * Connections are addressed by ``WebSocketConnectionID`` only; an id that has closed is ignored.
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
    private let handler: Handler

    // MARK: cross-thread state

    private struct ContextRef: @unchecked Sendable { let raw: OpaquePointer }
    private struct Inbox {
        var jobs: [Job] = []
        var ctx: ContextRef?
        var stopping = false
    }
    private let inbox = Mutex(Inbox())
    private let nextID = Atomic<UInt64>(1)
    private let serviceThread = Atomic<UInt>(0)
    private let started = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    private let exitedFlag = Atomic<Bool>(false)

    private let cConnectsRequested = Atomic<Int>(0)
    private let cConnected = Atomic<Int>(0)
    private let cConnectFailures = Atomic<Int>(0)
    private let cClosed = Atomic<Int>(0)
    private let cMsgSent = Atomic<Int>(0)
    private let cMsgReceived = Atomic<Int>(0)
    private let cBytesSent = Atomic<Int>(0)
    private let cBytesReceived = Atomic<Int>(0)

    // MARK: loop-confined state (service thread only)

    private var ctx: OpaquePointer?
    private var protocols: UnsafeMutablePointer<lws_protocols>?
    private var protocolName: UnsafeMutablePointer<CChar>?
    private var retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>?
    /// Strings the lws context keeps pointers to (the CA file path).
    private var tlsStrings: [UnsafeMutablePointer<CChar>] = []
    private var tickTimer: UnsafeMutablePointer<lwss_timer_t>?
    private var stopTimer: UnsafeMutablePointer<lwss_timer_t>?
    private var conns: [WebSocketConnectionID: Conn] = [:]
    private var pending: [PendingConnect] = []
    private var pendingHead = 0
    private var inFlight = 0
    private var stopping = false
    /// Connections whose close frame should start on the next inbox drain (outside their callback).
    private var closeNow: [WebSocketConnectionID] = []
    private var closeNowHead = 0
    private var closingInFlight = 0
    private var scratch: UnsafeMutablePointer<UInt8>
    private var scratchCapacity: Int
    private let pre = Int(lwss_pre())

    /// Creates a stopped client. Call ``start()`` before anything else.
    public init(configuration: WebSocketClientConfiguration = .init(), handler: @escaping Handler) {
        self.configuration = configuration
        self.handler = handler
        scratchCapacity = 64 * 1024
        scratch = .allocate(capacity: scratchCapacity)
    }

    deinit {
        scratch.deallocate()
    }

    // MARK: lifecycle

    /// Creates the lws context on a new service thread and returns once it runs.
    public func start() throws {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else {
            throw WebSocketClientError.alreadyStarted
        }
        if configuration.raiseFileLimit { Self.raiseFileLimit() }
        let ready = DispatchSemaphore(value: 0)
        let ok = Atomic<Bool>(false)
        let thread = Thread { [self] in
            serviceThread.store(UInt(pthread_self()), ordering: .releasing)
            let created = createContext()
            ok.store(created, ordering: .releasing)
            ready.signal()
            if created { runLoop() }
            exitedFlag.store(true, ordering: .releasing)
            exited.signal()
        }
        thread.name = "lws-client"
        thread.stackSize = 1 << 20
        thread.start()
        ready.wait()
        guard ok.load(ordering: .acquiring) else {
            exited.wait()
            throw WebSocketClientError.contextCreationFailed
        }
    }

    /// Stops the loop and waits for the service thread to exit. Open connections are dropped
    /// without close frames (use ``close(_:code:)`` first for clean closes). Idempotent.
    public func shutdown() {
        guard started.load(ordering: .acquiring) else { return }
        precondition(!isOnServiceThread, "shutdown() must not be called on the service thread")
        post(.stop)
        if !exitedFlag.load(ordering: .acquiring) {
            exited.wait()
            exited.signal()  // let other callers of shutdown() through as well
        }
    }

    /// True when called on this client's service thread (inside the handler, for example).
    public var isOnServiceThread: Bool {
        let t = serviceThread.load(ordering: .acquiring)
        return t != 0 && pthread_equal(pthread_self(), pthread_t(t)) != 0
    }

    /// A snapshot of the counters.
    public var statistics: WebSocketClientStatistics {
        var s = WebSocketClientStatistics()
        s.connectsRequested = cConnectsRequested.load(ordering: .relaxed)
        s.connected = cConnected.load(ordering: .relaxed)
        s.connectFailures = cConnectFailures.load(ordering: .relaxed)
        s.closed = cClosed.load(ordering: .relaxed)
        s.messagesSent = cMsgSent.load(ordering: .relaxed)
        s.messagesReceived = cMsgReceived.load(ordering: .relaxed)
        s.bytesSent = cBytesSent.load(ordering: .relaxed)
        s.bytesReceived = cBytesReceived.load(ordering: .relaxed)
        return s
    }

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
        cConnectsRequested.wrappingAdd(1, ordering: .relaxed)
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
    public func close(_ id: WebSocketConnectionID, code: UInt16 = 1000) {
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
    public func closeAll(code: UInt16 = 1000) { submit(.closeAll(code)) }

    // MARK: inbox

    private enum Job: Sendable {
        case connect(PendingConnect)
        case send(WebSocketConnectionID, [UInt8], binary: Bool, fragment: Int)
        case close(WebSocketConnectionID, UInt16)
        case closeAll(UInt16)
        case abort(WebSocketConnectionID, WebSocketAbortMode)
        case pause(WebSocketConnectionID)
        case resume(WebSocketConnectionID)
        case perform(@Sendable () -> Void)
        case stop
    }

    private struct PendingConnect: Sendable {
        let id: WebSocketConnectionID
        let url: WebSocketURL
        let sourceAddress: String?
    }

    private func submit(_ job: Job) {
        if isOnServiceThread, !stopping, ctx != nil {
            execute(job)
        } else {
            post(job)
        }
    }

    private func post(_ job: Job) {
        inbox.withLock { box in
            if box.stopping { return }
            box.jobs.append(job)
            if case .stop = job { box.stopping = true }
            if let c = box.ctx { lws_cancel_service(c.raw) }
        }
    }

    /// Loop side: runs the queued jobs (on `EVENT_WAIT_CANCELLED`; may be spurious).
    private func drainInbox() {
        let jobs = inbox.withLock { box -> [Job] in
            let j = box.jobs
            box.jobs.removeAll(keepingCapacity: true)
            return j
        }
        for job in jobs { execute(job) }
        pumpCloses()
    }

    /// Starts queued close handshakes, at most `maxHandshakesInFlight` at a time: each one
    /// inserts lws timeout suls with a linear sorted walk, so thousands at once cost O(n^2).
    private func pumpCloses() {
        while closeNowHead < closeNow.count, closingInFlight < configuration.maxHandshakesInFlight {
            let id = closeNow[closeNowHead]
            closeNowHead += 1
            if let c = conns[id] { startCloseHandshake(c) }
        }
        if closeNowHead == closeNow.count {
            closeNow.removeAll(keepingCapacity: closeNow.count < 4096)
            closeNowHead = 0
        }
    }

    /// Sends the close frame via lws's polite close path. Must run outside this wsi's callbacks.
    ///
    /// Returning -1 from `CLIENT_WRITEABLE` after `lws_close_reason` does NOT send a close frame
    /// with Debian's lws 4.1.6 + libuv: its `_DEBUG` build calls close a second time ("uv repeat
    /// test" in service.c), which finds the wsi in WAITING_TO_SEND_CLOSE and kills the socket.
    /// `LWS_TO_KILL_SYNC` closes with NOSTATUS without marking the socket unusable, so lws queues
    /// the close frame, sends it on POLLOUT and waits up to 5 s for the peer's reply.
    private func startCloseHandshake(_ c: Conn) {
        guard let wsi = c.wsi, c.established, !c.aborted, !c.closeCounted else { return }
        c.closeCounted = true
        closingInFlight += 1
        lws_close_reason(wsi, lws_close_status(UInt32(c.closeCode)), nil, 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
    }

    private func scheduleCloseHandshake(_ c: Conn) {
        closeNow.append(c.id)
        if let ctx { lws_cancel_service(ctx) }
    }

    private func execute(_ job: Job) {
        switch job {
        case .connect(let p):
            if stopping {
                failConnect(p.id, reason: "client shutting down")
            } else {
                pending.append(p)
                pumpConnects()
            }
        case .send(let id, let bytes, let binary, let fragment):
            guard let c = conns[id], !c.closing, !c.aborted else { return }
            enqueue(c, bytes, binary: binary, fragment: fragment)
        case .close(let id, let code):
            if let c = conns[id] {
                beginClose(c, code: code)
            } else {
                removePending(id)
            }
        case .closeAll(let code):
            while pendingHead < pending.count {
                let p = pending[pendingHead]
                pendingHead += 1
                failConnect(p.id, reason: "closed before connecting")
            }
            compactPending()
            for c in Array(conns.values) { beginClose(c, code: code) }
        case .abort(let id, let mode):
            if let c = conns[id] { abortConn(c, mode: mode) } else { removePending(id) }
        case .pause(let id):
            guard let c = conns[id], let wsi = c.wsi, !c.paused else { return }
            c.paused = true
            lws_rx_flow_control(wsi, 0)
        case .resume(let id):
            guard let c = conns[id], let wsi = c.wsi, c.paused else { return }
            c.paused = false
            lws_rx_flow_control(wsi, 1)
            if c.established, !c.queue.isEmpty || c.closing { lws_callback_on_writable(wsi) }
        case .perform(let body):
            body()
        case .stop:
            beginStop()
        }
    }

    // MARK: connections

    /// One connection, confined to the service thread.
    private final class Conn {
        let id: WebSocketConnectionID
        var wsi: OpaquePointer?
        var established = false
        var paused = false
        var closing = false
        var closeStarted = false
        var closeCounted = false
        var closeCode: UInt16 = 1000
        var aborted = false
        var peerCloseCode: UInt16?
        var queue: [OutFrame] = []
        var queueHead = 0
        var rx: [UInt8] = []
        var rxBinary = false

        init(id: WebSocketConnectionID) { self.id = id }
    }

    private struct OutFrame {
        var bytes: [UInt8]
        var range: Range<Int>
        var flags: Int32
        var lastOfMessage: Bool
    }

    private func pumpConnects() {
        while inFlight < configuration.maxHandshakesInFlight, pendingHead < pending.count, !stopping {
            let p = pending[pendingHead]
            pendingHead += 1
            startConnect(p)
        }
        compactPending()
    }

    private func compactPending() {
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: pending.count < 4096)
            pendingHead = 0
        } else if pendingHead > 4096, pendingHead * 2 > pending.count {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
    }

    private func removePending(_ id: WebSocketConnectionID) {
        guard let i = pending[pendingHead...].firstIndex(where: { $0.id == id }) else { return }
        pending.remove(at: i)
        failConnect(id, reason: "closed before connecting")
    }

    private func startConnect(_ p: PendingConnect) {
        guard let ctx else { failConnect(p.id, reason: "no context"); return }
        let c = Conn(id: p.id)
        conns[p.id] = c
        inFlight += 1
        var info = lws_client_connect_info()
        info.context = ctx
        info.port = Int32(p.url.port)
        info.ietf_version_or_minus_one = -1
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: UInt(p.id))
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        if p.url.secure {
            var flags = Int32(LCCSCF_USE_SSL.rawValue)
            if configuration.insecureSkipVerify {
                flags |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue) | Int32(LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue)
                    | Int32(LCCSCF_ALLOW_EXPIRED.rawValue) | Int32(LCCSCF_ALLOW_INSECURE.rawValue)
            }
            info.ssl_connection = flags
        }
        // lws copies every string into its own stash during lws_client_connect_via_info.
        let wsi: OpaquePointer? = p.url.host.withCString { host in
            p.url.pathAndQuery.withCString { path in
                p.url.hostHeader.withCString { hostHeader in
                    withOptionalCString(configuration.origin) { origin in
                        withOptionalCString(p.sourceAddress) { iface in
                            info.address = host
                            info.path = path
                            info.host = hostHeader
                            info.origin = origin ?? hostHeader
                            info.iface = iface
                            // Sec-WebSocket-Protocol when configured (MQTT brokers need `mqtt`).
                            return withOptionalCString(configuration.subprotocol) { subprotocol in
                                info.protocol = subprotocol
                                if subprotocol != nil { info.local_protocol_name = UnsafePointer(protocolName) }
                                return lws_client_connect_via_info(&info)
                            }
                        }
                    }
                }
            }
        }
        if let wsi {
            if conns[p.id] === c { c.wsi = wsi }
        } else if conns[p.id] === c {
            // Failed synchronously without a CONNECTION_ERROR callback.
            conns[p.id] = nil
            inFlight -= 1
            failConnect(p.id, reason: "lws_client_connect_via_info failed")
        }
    }

    private func failConnect(_ id: WebSocketConnectionID, reason: String) {
        cConnectFailures.wrappingAdd(1, ordering: .relaxed)
        handler(self, .connectFailed(id, reason: reason))
    }

    private func enqueue(_ c: Conn, _ bytes: [UInt8], binary: Bool, fragment: Int) {
        let base: Int32 = binary ? Int32(LWS_WRITE_BINARY.rawValue) : Int32(LWS_WRITE_TEXT.rawValue)
        let cont = Int32(LWS_WRITE_CONTINUATION.rawValue)
        let noFin = Int32(LWS_WRITE_NO_FIN.rawValue)
        if fragment <= 0 || bytes.count <= fragment {
            c.queue.append(OutFrame(bytes: bytes, range: 0..<bytes.count, flags: base, lastOfMessage: true))
        } else {
            var start = 0
            while start < bytes.count {
                let end = min(start + fragment, bytes.count)
                var flags = start == 0 ? base : cont
                if end < bytes.count { flags |= noFin }
                c.queue.append(OutFrame(bytes: bytes, range: start..<end, flags: flags, lastOfMessage: end == bytes.count))
                start = end
            }
        }
        if c.established, !c.paused, let wsi = c.wsi { lws_callback_on_writable(wsi) }
    }

    private func beginClose(_ c: Conn, code: UInt16) {
        guard !c.closing, !c.aborted else { return }
        c.closing = true
        c.closeCode = code
        if let wsi = c.wsi {
            if c.established {
                if !c.paused { lws_callback_on_writable(wsi) }
            } else {
                // Still handshaking: nothing to close cleanly; drop it.
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        }
    }

    private func abortConn(_ c: Conn, mode: WebSocketAbortMode) {
        guard !c.aborted, let wsi = c.wsi else { return }
        c.aborted = true
        c.queue.removeAll()
        c.queueHead = 0
        let fd = lws_get_socket_fd(wsi)
        if fd >= 0 {
            switch mode {
            case .fin:
                Glibc.shutdown(fd, Int32(SHUT_RDWR))
            case .reset:
                var lg = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, socklen_t(MemoryLayout<linger>.size))
            }
        }
        // NOSTATUS close: lws sends no close frame (rops_close_via_role_protocol_ws).
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }

    // MARK: lws callback dispatch (service thread)

    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons,
                            _ inp: UnsafeMutableRawPointer?, _ len: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            drainInbox()
            return 0

        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            guard let c = conn(of: wsi) else { return -1 }
            c.wsi = wsi
            c.established = true
            inFlight -= 1
            cConnected.wrappingAdd(1, ordering: .relaxed)
            handler(self, .connected(c.id))
            if c.closing || c.queueHead < c.queue.count { lws_callback_on_writable(wsi) }
            pumpConnects()
            return 0

        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let why = inp.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error"
            if let c = conn(of: wsi), !c.established {
                conns[c.id] = nil
                inFlight -= 1
                failConnect(c.id, reason: why)
                pumpConnects()
            }
            return 0

        case LWS_CALLBACK_CLIENT_RECEIVE:
            guard let c = conn(of: wsi) else { return -1 }
            let final = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
            if c.rx.isEmpty {
                c.rxBinary = lws_frame_is_binary(wsi) != 0
                if final {
                    deliver(c, UnsafeRawBufferPointer(start: inp, count: len))
                    return 0
                }
            }
            if let inp, len > 0 {
                c.rx.append(contentsOf: UnsafeRawBufferPointer(start: inp, count: len))
            }
            if c.rx.count > configuration.maxMessageBytes { return -1 }
            if final {
                let msg = c.rx
                c.rx = []
                msg.withUnsafeBytes { deliver(c, $0) }
            }
            return 0

        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard let c = conn(of: wsi) else { return -1 }
            if c.aborted || c.paused { return 0 }
            if c.queueHead < c.queue.count {
                let f = c.queue[c.queueHead]
                c.queueHead += 1
                if c.queueHead == c.queue.count {
                    c.queue.removeAll(keepingCapacity: c.queue.capacity <= 16)
                    c.queueHead = 0
                }
                if writeFrame(wsi, f) < 0 { return -1 }
                if c.queueHead < c.queue.count || (c.closing && !c.closeStarted) { lws_callback_on_writable(wsi) }
                return 0
            }
            if c.closing, !c.closeStarted {
                c.closeStarted = true
                scheduleCloseHandshake(c)
            }
            return 0

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let c = conn(of: wsi) {
                if let inp, len >= 2 {
                    let b = inp.assumingMemoryBound(to: UInt8.self)
                    c.peerCloseCode = UInt16(b[0]) << 8 | UInt16(b[1])
                } else {
                    c.peerCloseCode = 1005
                }
            }
            return 0

        case LWS_CALLBACK_CLIENT_CLOSED:
            finishClosed(wsi)
            return 0

        case LWS_CALLBACK_WSI_DESTROY:
            // Safety net: anything still attached to this wsi is reported now.
            if let c = conn(of: wsi), c.wsi == nil || c.wsi == wsi {
                if c.established {
                    finishClosed(wsi)
                } else {
                    conns[c.id] = nil
                    inFlight -= 1
                    failConnect(c.id, reason: stopping ? "client shutting down" : "destroyed during handshake")
                    if !stopping { pumpConnects() }
                }
            }
            return 0

        default:
            return 0
        }
    }

    private func conn(of wsi: OpaquePointer) -> Conn? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return conns[WebSocketConnectionID(UInt(bitPattern: raw))]
    }

    private func deliver(_ c: Conn, _ bytes: UnsafeRawBufferPointer) {
        cMsgReceived.wrappingAdd(1, ordering: .relaxed)
        cBytesReceived.wrappingAdd(bytes.count, ordering: .relaxed)
        handler(self, .message(c.id, WebSocketMessage(bytes: bytes, isBinary: c.rxBinary)))
    }

    private func finishClosed(_ wsi: OpaquePointer) {
        guard let c = conn(of: wsi) else { return }
        conns[c.id] = nil
        cClosed.wrappingAdd(1, ordering: .relaxed)
        if c.closeCounted {
            closingInFlight -= 1
            if closeNowHead < closeNow.count, !stopping, let ctx { lws_cancel_service(ctx) }  // pump on next drain
        }
        let info = WebSocketCloseInfo(closedLocally: c.closing, aborted: c.aborted,
                                      peerCloseCode: c.peerCloseCode, byShutdown: stopping)
        handler(self, .closed(c.id, info))
    }

    /// Copies the frame into the scratch buffer (lws masks in place) and writes it.
    private func writeFrame(_ wsi: OpaquePointer, _ f: OutFrame) -> Int32 {
        let n = f.range.count
        if pre + n > scratchCapacity {
            scratch.deallocate()
            scratchCapacity = max(pre + n, scratchCapacity * 2)
            scratch = .allocate(capacity: scratchCapacity)
        }
        f.bytes.withUnsafeBufferPointer { src in
            if n > 0 { (scratch + pre).update(from: src.baseAddress! + f.range.lowerBound, count: n) }
        }
        let w = lwss_write(wsi, scratch + pre, n, f.flags)
        if w < n { return -1 }
        if f.lastOfMessage { cMsgSent.wrappingAdd(1, ordering: .relaxed) }
        cBytesSent.wrappingAdd(n, ordering: .relaxed)
        return 0
    }

    // MARK: context and loop (service thread)

    private func createContext() -> Bool {
        lws_set_log_level(configuration.lwsLogLevel, nil)
        let name = strdup("presence-client")!
        protocolName = name
        let protos = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protos.initialize(repeating: lws_protocols(), count: 2)
        protos[0].name = UnsafePointer(name)
        protos[0].callback = webSocketClientLwsCallback
        protos[0].per_session_data_size = 0
        protos[0].rx_buffer_size = configuration.rxBufferSize
        protos[0].tx_packet_size = 0
        protocols = protos

        // Always pass a policy: without one, a client wsi inherits the context default
        // (ping 300 s / hang-up 310 s), whose per-connection validity sul is inserted with a
        // linear sorted walk over every pending sul, i.e. O(n^2) over n connects. A policy with
        // hang-up 0 schedules no validity timer at all.
        let r = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        r.initialize(to: lws_retry_bo_t())
        r.pointee.secs_since_valid_ping = configuration.pingIntervalSeconds
        r.pointee.secs_since_valid_hangup = configuration.hangupSeconds
        retryPolicy = r

        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protos)
        info.gid = -1
        info.uid = -1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.connect_timeout_secs = configuration.connectTimeoutSeconds
        info.timeout_secs = configuration.connectTimeoutSeconds
        // TLS for wss:// connections, verifying against the system's CAs or --ca-file.
        info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
        if let caFile = configuration.caFile {
            let copy = strdup(caFile)!
            tlsStrings.append(copy)
            info.client_ssl_ca_filepath = UnsafePointer(copy)
        }
        if configuration.eventLoop == .libuv {
            // lws installs libuv watchers for SIGINT/SIGTERM (and SIGSEGV/SIGFPE/SIGHUP unless
            // told not to); route the first two to `signalHandler`, leave crashes alone.
            info.options |= UInt64(LWS_SERVER_OPTION_LIBUV) | UInt64(LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN)
            info.signal_cb = webSocketClientSignalCallback
        }
        guard let c = lws_create_context(&info) else {
            freeAllocations()
            return false
        }
        ctx = c
        inbox.withLock { $0.ctx = ContextRef(raw: c) }
        if configuration.tickIntervalMicroseconds > 0 {
            let t = UnsafeMutablePointer<lwss_timer_t>.allocate(capacity: 1)
            t.initialize(to: lwss_timer_t())
            t.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
            t.pointee.id = 1
            tickTimer = t
            lws_sul_schedule(c, 0, &t.pointee.sul, webSocketClientSulCallback,
                             lws_usec_t(configuration.tickIntervalMicroseconds))
        }
        // A job posted before the context existed is picked up by this first drain.
        lws_cancel_service(c)
        return true
    }

    private func runLoop() {
        guard let c = ctx else { return }
        while !stopping {
            if lws_service(c, 0) < 0 { break }
            // With libuv, lws_service only returns once the stage-1 destroy ran (see beginStop),
            // or if something stopped the uv loop: either way, leave.
            if configuration.eventLoop == .libuv { break }
        }
        inbox.withLock { $0.ctx = nil; $0.stopping = true }
        stopping = true
        lws_context_destroy(c)  // final stage (or the only one with poll)
        ctx = nil
        // Connects that never started.
        while pendingHead < pending.count {
            let p = pending[pendingHead]
            pendingHead += 1
            failConnect(p.id, reason: "client shutting down")
        }
        pending.removeAll()
        pendingHead = 0
        for (_, c) in conns {
            // Should be empty: lws reported CLOSED / WSI_DESTROY for every wsi.
            if c.established {
                cClosed.wrappingAdd(1, ordering: .relaxed)
                handler(self, .closed(c.id, WebSocketCloseInfo(closedLocally: c.closing, aborted: c.aborted,
                                                                peerCloseCode: c.peerCloseCode, byShutdown: true)))
            } else {
                failConnect(c.id, reason: "client shutting down")
            }
        }
        conns.removeAll()
        freeAllocations()
    }

    private func beginStop() {
        guard !stopping, let c = ctx else { return }
        stopping = true
        inbox.withLock { $0.ctx = nil; $0.stopping = true }
        if let t = tickTimer { lws_sul_cancel(&t.pointee.sul) }
        if configuration.eventLoop == .libuv {
            // The event-lib loop only returns when lws_context_destroy runs inside it.
            let t = UnsafeMutablePointer<lwss_timer_t>.allocate(capacity: 1)
            t.initialize(to: lwss_timer_t())
            t.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
            t.pointee.id = 2
            stopTimer = t
            lws_sul_schedule(c, 0, &t.pointee.sul, webSocketClientSulCallback, 1)
        }
    }

    fileprivate func timerFired(_ timer: UnsafeMutablePointer<lwss_timer_t>) {
        guard let c = ctx else { return }
        switch timer.pointee.id {
        case 1:
            if stopping { return }
            handler(self, .tick(nowMicros: monotonicMicros()))
            if !stopping {
                lws_sul_schedule(c, 0, &timer.pointee.sul, webSocketClientSulCallback,
                                 lws_usec_t(configuration.tickIntervalMicroseconds))
            }
        case 2:
            lws_context_destroy(c)  // stage 1: makes the libuv loop return from lws_service
        default:
            break
        }
    }

    fileprivate func signalReceived(_ signum: Int32) {
        if let h = configuration.signalHandler {
            h(signum)
        } else {
            signal(signum, SIG_DFL)
            raise(signum)
        }
    }

    private func freeAllocations() {
        if let p = protocols { p.deinitialize(count: 2); p.deallocate(); protocols = nil }
        if let n = protocolName { free(n); protocolName = nil }
        if let r = retryPolicy { r.deallocate(); retryPolicy = nil }
        if let t = tickTimer { t.deallocate(); tickTimer = nil }
        if let t = stopTimer { t.deallocate(); stopTimer = nil }
        for string in tlsStrings { free(string) }
        tlsStrings = []
    }

    private static func raiseFileLimit() {
        var rl = rlimit()
        #if os(Linux)
        let res = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let res = RLIMIT_NOFILE
        #endif
        if getrlimit(__rlimit_resource_t(UInt32(res)), &rl) == 0, rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max
            _ = setrlimit(__rlimit_resource_t(UInt32(res)), &rl)
        }
    }
}

private func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

/// The lws protocol callback: a global function so it converts to `@convention(c)`.
private func webSocketClientLwsCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                                        _ user: UnsafeMutableRawPointer?, _ inp: UnsafeMutableRawPointer?,
                                        _ len: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
    let client = Unmanaged<WebSocketClient>.fromOpaque(raw).takeUnretainedValue()
    return client.handle(wsi, reason, inp, len)
}

/// libuv signal watcher callback: `event_lib_handle` is the `uv_signal_t`, whose first field
/// (`uv_handle_t.data`) lws sets to the context.
private func webSocketClientSignalCallback(_ handle: UnsafeMutableRawPointer?, _ signum: Int32) {
    guard let handle, let context = handle.load(as: OpaquePointer?.self),
          let raw = lws_context_user(context) else { return }
    Unmanaged<WebSocketClient>.fromOpaque(raw).takeUnretainedValue().signalReceived(signum)
}

private func webSocketClientSulCallback(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let timer = lwss_timer_from_sul(sul), let owner = timer.pointee.owner else { return }
    Unmanaged<WebSocketClient>.fromOpaque(owner).takeUnretainedValue().timerFired(timer)
}
