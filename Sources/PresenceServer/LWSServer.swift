import CLibWebSockets
import Logging
import PresenceCore
import Prometheus
import PresenceWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Set by signal handlers; the loop notices them in `EVENT_WAIT_CANCELLED`.
let stopRequested = Atomic<Bool>(false)
let reloadRequested = Atomic<Bool>(false)
/// The running context, for the signal handler's `lws_cancel_service` (written once at start).
nonisolated(unsafe) var signalContext: OpaquePointer?

/// The thin I/O shell: one libwebsockets context on the libuv loop, one service thread.
///
/// Confinement: every stored property is touched only on the thread that calls `run()` (lws
/// callbacks run there). Other threads only call `requestStop()`. Hence `@unchecked Sendable`.
public final class LWSServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    let engine: Engine
    let logger: Logger

    var context: OpaquePointer?
    var protocols: UnsafeMutablePointer<lws_protocols>?
    var retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>?
    var stopTimer: UnsafeMutablePointer<lwss_timer_t>?
    var engineTimer: UnsafeMutablePointer<lwss_timer_t>?
    var engineTimerDeadline: Int64?
    var cStrings: [UnsafeMutablePointer<CChar>] = []
    var destroyStarted = false

    var connections: [UInt64: ShellConnection] = [:]
    /// Live WebSocket connections and recent connects per remote address, for the per-address limits.
    var connectionsByAddress: [String: Int] = [:]
    var connectsThisSecond: [String: (second: Int64, count: Int)] = [:]
    var nextConnectionID: UInt64 = 1
    /// Distinct User-Agent values seen (bounded), so connections share one copy.
    var userAgents: [String: String] = [:]
    var httpResponses: [OpaquePointer: PendingHTTPResponse] = [:]
    var pendingRequests: [OpaquePointer: PendingHTTPRequest] = [:]
    var streams: [UInt64: StreamConnection] = [:]
    var streamsByWSI: [OpaquePointer: UInt64] = [:]
    var keepAliveTimer: UnsafeMutablePointer<lwss_timer_t>?
    /// Interval of SSE `keep-alive` events.
    var keepAliveMicroseconds: Int64 { Int64(configuration.streamKeepAliveSeconds) * 1_000_000 }
    let rest: RESTHandler
    /// The port actually bound (useful with port 0).
    public private(set) var boundPort = 0

    /// Reloads the rules on SIGHUP; nil when the rules are not from a file.
    let reloadRules: (@Sendable () throws -> any AccessPolicy)?
    /// Reloads the limits file on SIGHUP; nil when limits are not from a file.
    let reloadLimits: (@Sendable () throws -> LimitSet?)?
    /// Reloads the token verifier's keys, secret and admin credential on SIGHUP.
    let reloadVerifier: (@Sendable () throws -> any TokenVerifier)?
    /// The JSON-lines log of limit checks, when configured.
    var limitEventLog: LimitEventLog?

    /// Durable storage, when configured: the storage thread, the last sequence it reported durable
    /// (written by that thread) and the last one the loop released acknowledgements for.
    let storage: (any StorageEngine)?
    var storageWriter: StorageWriter?
    let durableSequence = Atomic<UInt64>(0)
    var releasedSequence: UInt64 = 0
    var heldConnections: Set<UInt64> = []
    var heartbeatTimer: UnsafeMutablePointer<lwss_timer_t>?
    var livenessTimer: UnsafeMutablePointer<lwss_timer_t>?

    let metrics: ServerMetrics
    let startedAt = WallClock.nowMilliseconds()
    /// Monotonic time (ns) when the current step began: write-to-push is measured from it.
    var stepStartedAt: UInt64?
    var totals = Totals()
    /// The dashboard's last ten minutes, one sample a second (AdminActivity.swift).
    let activity = ActivitySampler()

    struct Totals {
        var messagesIn = 0
        var messagesOut = 0
        var bytesIn = 0
        var bytesOut = 0
        var pushes = 0
    }

    public init(configuration: ServerConfiguration, engine: Engine, logger: Logger,
                reloadRules: (@Sendable () throws -> any AccessPolicy)? = nil,
                reloadLimits: (@Sendable () throws -> LimitSet?)? = nil,
                reloadVerifier: (@Sendable () throws -> any TokenVerifier)? = nil,
                storage: (any StorageEngine)? = nil, metricsRegistry: PrometheusCollectorRegistry? = nil) {
        self.metrics = ServerMetrics(registry: metricsRegistry)
        self.configuration = configuration
        self.engine = engine
        self.logger = logger
        self.reloadRules = reloadRules
        self.reloadLimits = reloadLimits
        self.reloadVerifier = reloadVerifier
        self.storage = storage
        self.rest = RESTHandler(engine: engine, defaultNamespace: configuration.defaultNamespace)
    }

    deinit {
        protocols?.deallocate()
        retryPolicy?.deallocate()
        stopTimer?.deallocate()
        engineTimer?.deallocate()
        keepAliveTimer?.deallocate()
        heartbeatTimer?.deallocate()
        livenessTimer?.deallocate()
        for string in cStrings { free(string) }
    }

    private func keep(_ string: String) -> UnsafeMutablePointer<CChar> {
        let pointer = strdup(string)!
        cStrings.append(pointer)
        return pointer
    }

    /// Creates the context and binds the port. Throws with a clear message when that fails.
    public func start() throws(ServerError) {
        // PRESENCE_LWS_LOG=<lws level bitmask> shows libwebsockets' own logs when debugging the shell.
        let lwsLevel = getenv("PRESENCE_LWS_LOG").flatMap { Int32(String(cString: $0)) } ?? (Int32(LLL_ERR) | Int32(LLL_WARN))
        lws_set_log_level(lwsLevel, nil)

        let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        // Clients send no Sec-WebSocket-Protocol: lws binds them to protocols[0].
        protocols[0].name = UnsafePointer(keep("firebase-rtdb"))
        protocols[0].callback = presenceCallback
        protocols[0].per_session_data_size = MemoryLayout<UInt64>.size
        protocols[0].rx_buffer_size = configuration.rxBufferBytes
        protocols[0].tx_packet_size = FrameSplitter.maxFrameBytes + 64
        self.protocols = protocols

        // A zeroed policy: no lws validity timer per connection (each is a linear sorted insert on
        // every establish and PONG). Without a policy lws would apply its default 300/310 s one.
        // Pings and idle hang-ups are done by the shell's sweep (LWSServer+Liveness).
        let retry = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        retry.initialize(to: lws_retry_bo_t())
        self.retryPolicy = retry

        var info = lws_context_creation_info()
        info.port = Int32(configuration.port)
        info.iface = UnsafePointer(keep(configuration.host))
        info.protocols = UnsafePointer(protocols)
        info.options = UInt64(LWS_SERVER_OPTION_LIBUV) | UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
            | UInt64(LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE)
        info.retry_and_idle_policy = UnsafePointer(retry)
        if let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            for (what, path) in [("certificate", certificate), ("key", key)] where access(path, R_OK) != 0 {
                throw ServerError.startFailed("cannot read the TLS \(what) \(path)")
            }
            info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            info.ssl_cert_filepath = UnsafePointer(keep(certificate))
            info.ssl_private_key_filepath = UnsafePointer(keep(key))
            // TLS 1.2 and later only (OpenSSL 3's SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1).
            info.ssl_options_set = 0x0200_0000 | 0x0400_0000 | 0x1000_0000
        }
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.vhost_name = UnsafePointer(keep("default"))
        info.signal_cb = { _, _ in LWSServer.requestStop() }
        info.fd_limit_per_thread = 0
        info.timeout_secs = 10

        guard let context = lws_create_context(&info) else {
            if configuration.tlsCertificatePath != nil {
                throw ServerError.startFailed("could not start TLS on \(configuration.host):\(configuration.port): check that --tls-cert and --tls-key are PEM files of a certificate and its matching private key, and that the port is free")
            }
            throw ServerError.startFailed("could not listen on \(configuration.host):\(configuration.port) (address in use, or not an address of this machine?)")
        }
        self.context = context
        if let vhost = lws_get_vhost_by_name(context, "default") {
            boundPort = Int(lws_get_vhost_listen_port(vhost))
        }
        if let path = configuration.limitEventLogPath { limitEventLog = try LimitEventLog(path: path) }
        signalContext = context
        installSignalHandlers()
        startStorage()
        startLivenessSweep()
        startActivitySampling()
    }

    private func installSignalHandlers() {
        signal(SIGTERM) { _ in LWSServer.requestStop() }
        signal(SIGINT) { _ in LWSServer.requestStop() }
        signal(SIGHUP) { _ in
            reloadRequested.store(true, ordering: .relaxed)
            if let context = signalContext { lws_cancel_service(context) }
        }
        signal(SIGPIPE, SIG_IGN)
    }

    /// Safe from any thread and from signal handlers.
    public static func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
        if let context = signalContext { lws_cancel_service(context) }
    }

    /// Services the loop until a stop is requested. Call on the thread that called `start()`.
    public func run() {
        guard let context else { return }
        while !destroyStarted {
            if lws_service(context, 0) < 0 { break }
        }
        // Final stage of the two-stage destroy (the first ran inside the loop).
        lws_context_destroy(context)
        signalContext = nil
        self.context = nil
        stopStorage()
        logger.info("server stopped")
    }

    /// Called on the loop when the stop flag is seen: schedule the in-loop destroy (stage 1),
    /// which makes an event-library `lws_service` return.
    func beginShutdown() {
        guard let context, stopTimer == nil else { return }
        logger.info("stopping: closing \(connections.count) connections with 1001 going away")
        // Say goodbye first: flush what is queued and send a close frame, then destroy shortly after.
        for connection in connections.values where connection.pendingClose == nil {
            connection.pendingClose = (1001, "server shutting down")
            lws_callback_on_writable(connection.wsi)
        }
        let timer = makeTimer()
        stopTimer = timer
        lws_sul_schedule(context, 0, &timer.pointee.sul, { sul in
            guard let sul else { return }
            let server = LWSServer.owner(of: sul)
            if let context = server.context, !server.destroyStarted {
                server.destroyStarted = true
                lws_context_destroy(context)
            }
        }, connections.isEmpty ? 1 : 250_000)
    }

    func now() -> Int64 { WallClock.nowMilliseconds() }

    /// SIGHUP: load the certificate and key again (renewed files at the same paths). Existing
    /// connections keep their session; new ones get the new certificate. A pair that does not load
    /// leaves the old one in use.
    func reloadCertificate() {
        guard let context, let certificatePath = configuration.tlsCertificatePath, let keyPath = configuration.tlsKeyPath else { return }
        guard let certificate = TextFile.read(certificatePath), let key = TextFile.read(keyPath) else {
            logger.error("TLS certificate not reloaded: cannot read \(certificatePath) or \(keyPath)")
            return
        }
        let result = certificate.withCString { certificatePointer in
            key.withCString { keyPointer in
                lws_tls_cert_updated(context, certificatePath, keyPath, certificatePointer, certificate.utf8.count,
                                     keyPointer, key.utf8.count)
            }
        }
        if result == 0 {
            logger.notice("TLS certificate reloaded from \(certificatePath)")
        } else {
            logger.error("TLS certificate not reloaded (does the key match the certificate?); the previous one stays in use")
        }
    }

    /// SIGHUP: load the TLS certificate, the token keys and credentials, the limits and the rules
    /// again, and reopen the limit event log. Each file that does not load leaves what is running in
    /// force; listeners the new rules no longer allow are revoked with `c`.
    func reloadIfRequested() {
        guard reloadRequested.exchange(false, ordering: .relaxed) else { return }
        reloadCertificate()
        if let log = limitEventLog, !log.reopen() { logger.error("cannot reopen the limit event log \(log.path)") }
        if let reloadVerifier {
            do {
                engine.setVerifier(try reloadVerifier())
                logger.notice("token keys and credentials reloaded")
            } catch {
                logger.error("token keys not reloaded, the previous ones stay in force: \(error)")
            }
        }
        if let reloadLimits {
            do {
                let limits = try reloadLimits()
                engine.setLimits(limits)
                logger.notice("limits reloaded", metadata: ["limits": "\(limits?.limits.map(\.name) ?? [])"])
            } catch {
                logger.error("limits not reloaded, the previous limits stay in force: \(error)")
            }
        }
        guard let reloadRules else { return }
        do {
            let policy = try reloadRules()
            engine.setPolicy(policy, now: now())
            logger.notice("rules reloaded")
            flushEngine()
        } catch {
            logger.error("rules not reloaded, the previous rules stay in force: \(error)")
        }
    }

    /// Limit checks of the last step: counted in `/metrics` and appended to the event log.
    func recordLimitEvents() {
        let events = engine.takeLimitEvents()
        guard !events.isEmpty else { return }
        for event in events { metrics.limitChecked(event) }
        limitEventLog?.append(events)
    }
}

public enum ServerError: Error, CustomStringConvertible {
    case startFailed(String)
    public var description: String {
        switch self {
        case .startFailed(let message): return message
        }
    }
}
