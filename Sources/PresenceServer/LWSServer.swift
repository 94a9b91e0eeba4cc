import CLibWebSockets
import Logging
import PresenceCore
import PresenceLoop
import PresenceWire
import Prometheus

#if canImport(Glibc)
import Glibc
#endif

/// The thin I/O shell around the engine: one libwebsockets context on one libuv loop, one service
/// thread. It is a few parts with one job each (see `docs/architecture.md`):
///
/// - `Binding/`: the lws callback, which hands each event to the part that owns it, and every lws
///   read and write;
/// - `Connections/`: the connection table, per-address admission, client addresses;
/// - `WebSocket/`: the `/.ws` route (upgrade, receive, decode, close);
/// - `Outbound/`: encode once, the durability barrier (`DeliveryOrder`), write-through or queue,
///   the slow-reader limit, closing;
/// - `HTTP/`: REST, Server-Sent Events streams, the operator API, responses;
/// - `Timers/`: liveness (pings, idle hang-ups);
/// - `Storage/`: the storage thread and the link that brings "durable" back to the loop;
/// - `EngineSteps`: running the engine after each event, and its timer;
/// - the loop itself is `PresenceLoop.LoopRuntime` (timers, the cross-thread inbox, shutdown),
///   which another event source (the scale-out's Redis connections) can share: see `loop`.
///
/// Confinement: everything runs on the thread that calls `start()` and `run()` (lws callbacks run
/// there). Other threads only call `requestStop()` or post to `loop`. Hence `@unchecked Sendable`.
public final class LWSServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    let engine: Engine
    let logger: Logger
    let runtime: LoopRuntime
    let metrics: ServerMetrics
    let table = ConnectionTable()
    let storage: StorageLink
    let streams: EventStreams
    let outbox: Outbox
    let steps: EngineSteps
    let webSocket: WebSocketRoute
    let responder = HTTPResponder()
    let operators: OperatorAPI
    let http: HTTPRoute
    let liveness: LivenessSweep
    let shedder: WriteShedder
    /// Replicated mode (`--storage redis`): the engine's cluster effects on Redis.
    let cluster: ClusterLink?
    private let reloader: Reloader
    private var contextSetup: LWSContextSetup?
    /// At most `--max-accepts-per-turn` new connections a turn (nil with 0: lws accepts them all).
    private(set) var acceptGovernor: AcceptGovernor?
    /// The port actually bound (useful with port 0).
    public private(set) var boundPort = 0

    /// The node stopped because it was fenced (`--storage redis`): it must not serve on, and its
    /// supervisor should start it again (a new incarnation).
    public var stoppedFenced: Bool { cluster?.fenced ?? false }

    /// The event loop the server runs on, for a second source of events (see `LoopRuntime`).
    public var loop: LoopRuntime { runtime }

    public init(configuration: ServerConfiguration, engine: Engine, logger: Logger,
                reloadRules: (@Sendable () throws -> any AccessPolicy)? = nil,
                reloadLimits: (@Sendable () throws -> LimitSet?)? = nil,
                reloadVerifier: (@Sendable () throws -> any TokenVerifier)? = nil,
                storage: (any StorageEngine)? = nil, cluster: ClusterSettings? = nil, metricsRegistry: PrometheusCollectorRegistry? = nil) throws(ServerError) {
        do {
            runtime = try LoopRuntime()
        } catch {
            throw .startFailed(error.description)
        }
        self.configuration = configuration
        self.engine = engine
        self.logger = logger
        reloader = Reloader(rules: reloadRules, limits: reloadLimits, verifier: reloadVerifier)
        metrics = ServerMetrics(registry: metricsRegistry)
        let limitEventLog = try configuration.limitEventLogPath.map { path throws(ServerError) in try LimitEventLog(path: path) }
        let rest = RESTHandler(engine: engine, defaultNamespace: configuration.defaultNamespace)
        self.storage = StorageLink(storage: storage, logger: logger, metrics: metrics)
        let loopRuntime = runtime
        let cluster = cluster.map { ClusterLink(settings: $0, engine: engine, runtime: loopRuntime, logger: logger) }
        self.cluster = cluster
        let slices = SlicedReplies(runtime: runtime, sliceMicroseconds: configuration.sliceMicroseconds)
        streams = EventStreams(configuration: configuration, logger: logger, runtime: runtime, slices: slices)
        outbox = Outbox(maxQueuedBytes: configuration.maxQueuedBytes, logger: logger, metrics: metrics, table: table, streams: streams,
                        slices: slices, stalledAfterMilliseconds: configuration.pushbackStallMilliseconds)
        steps = EngineSteps(engine: engine, metrics: metrics, storage: self.storage, outbox: outbox, limitEventLog: limitEventLog,
                            runtime: runtime, cluster: cluster)
        let storageLink = self.storage, outboundPath = outbox
        let throttle = InboundThrottle(
            table: table, logger: logger, metrics: metrics, runtime: runtime,
            pushback: WriterPushback(maxPendingWrites: configuration.pushbackPendingWrites, maxQueuedBytes: configuration.pushbackQueuedBytes),
            stalledPushbackMilliseconds: 10 * configuration.pushbackStallMilliseconds,
            backlog: { [unowned storageLink, unowned outboundPath] in
                WriterPushback.Backlog(pendingWrites: storageLink.pendingWrites,
                                       queuedBytes: outboundPath.drainableBacklogBytes(over: configuration.pushbackQueuedBytes / 2))
            },
            turnShareMicroseconds: configuration.sliceMicroseconds)
        let connections = table
        let shedder = WriteShedder(settings: .init(busyPercent: configuration.shedBusyPercent, maxPendingWrites: configuration.shedPendingWrites,
                                                   maxReadDelayMilliseconds: Double(configuration.shedReadDelayMilliseconds)),
                                   logger: logger, metrics: metrics, runtime: runtime,
                                   pendingWrites: { [unowned storageLink] in storageLink.pendingWrites },
                                   unreadBytes: { [unowned connections] id in connections[id].map { unreadBytes(onSocket: $0.socket) } })
        self.shedder = shedder
        throttle.dropSlowestReaders = { [unowned outboundPath] target in outboundPath.dropSlowestReaders(downTo: target) }
        slices.refuse = { id, message in engine.refusedDeferredRead(ConnectionID(id), message: message) }
        slices.refuseListen = { id, read, tag, message in
            engine.refusedDeferredListen(ConnectionID(id), read: read, tag: tag, message: message)
        }
        let engineSteps = steps
        slices.admit = { [unowned engineSteps] _, read in
            let refusal = engine.useDeferredReadLimit(read, now: WallClock.nowMilliseconds())
            return (refusal, engineSteps.run())  // the use is stored as any other; the reply waits for it
        }
        slices.charge = { [unowned table] id, nanoseconds in
            if let connection = table[id], connection.closing == nil {
                throttle.charge(connection, bytes: 0, endsMessage: false, handlingNanoseconds: nanoseconds)
            }
        }
        let webSocket = WebSocketRoute(configuration: configuration, logger: logger, metrics: metrics, engine: engine, table: table,
                                       outbox: outbox, steps: steps, throttle: throttle, shedder: shedder)
        self.webSocket = webSocket
        shedder.bytesRead = { [unowned webSocket] in webSocket.bytesReceived }
        operators = OperatorAPI(configuration: configuration, logger: logger, engine: engine, rest: rest, metrics: metrics,
                                table: table, outbox: outbox, storage: self.storage, cluster: cluster,
                                received: { [unowned webSocket] in (webSocket.messagesReceived, webSocket.bytesReceived) })
        http = HTTPRoute(configuration: configuration, logger: logger, engine: engine, rest: rest, table: table,
                         responder: responder, streams: streams, operators: operators, steps: steps, storage: self.storage, slices: slices,
                         runtime: runtime, shedder: shedder)
        liveness = LivenessSweep(configuration: configuration, logger: logger, table: table, outbox: outbox, streams: streams,
                                 runtime: runtime)
    }

    /// Creates the context and binds the port. Throws with a clear message when that fails.
    public func start() throws(ServerError) {
        // PRESENCE_LWS_LOG=<lws level bitmask> shows libwebsockets' own logs when debugging the shell.
        let lwsLevel = getenv("PRESENCE_LWS_LOG").flatMap { Int32(String(cString: $0)) } ?? (Int32(LLL_ERR) | Int32(LLL_WARN))
        lws_set_log_level(lwsLevel, nil)
        let setup = try LWSContextSetup(configuration: configuration, user: Unmanaged.passUnretained(self).toOpaque())
        contextSetup = setup
        var info = setup.info
        let context: OpaquePointer
        do {
            context = try runtime.createContext(&info)
        } catch {
            throw LWSContextSetup.startFailure(configuration)
        }
        // On a foreign loop lws returns a context even when the vhost could not listen (it then
        // destroys the context inside the loop): no vhost means it failed.
        guard let vhost = lws_get_vhost_by_name(context, "default"), lws_get_vhost_listen_port(vhost) > 0 else {
            runtime.abandon()
            throw LWSContextSetup.startFailure(configuration)
        }
        boundPort = Int(lws_get_vhost_listen_port(vhost))
        if configuration.maxAcceptsPerTurn > 0 {
            let governor = AcceptGovernor(perTurn: configuration.maxAcceptsPerTurn, vhost: vhost,
                                          tls: configuration.tlsCertificatePath != nil, metrics: metrics)
            if governor.attach(to: runtime.uvLoop) > 0 {
                acceptGovernor = governor
            } else {
                logger.warning("no listening socket found on the loop: --max-accepts-per-turn is not applied")
            }
        }
        webSocket.boundPort = boundPort
        runtime.receiveSignals()
        Signals.install()
        MaskTap.onViolation(tapViolation, context: Unmanaged.passUnretained(self).toOpaque())
        storage.start(engine: engine, runtime: runtime) { [unowned self] sequence in durable(upTo: sequence) }
        runtime.onTurnEnd { [unowned self] in endOfTurn() }
        if let cluster {
            cluster.runSteps = { [unowned self] in steps.run() }
            let address = OperatorAPI.advertisedAddress(host: configuration.host, port: boundPort)
            cluster.directory.status = { [unowned operators] in operators.nodeStatus(address: address) }
            cluster.directory.onKick = { [unowned operators] kick in operators.kickFromCluster(kick) }
            cluster.refusals.onRefused = { [unowned operators] ns in operators.closeRefused(namespace: ns) }
            webSocket.isRefused = { [unowned cluster] ns in cluster.refusals.reason(for: ns) != nil }
            cluster.asking.onAsk = { [unowned operators] ask in operators.answerClusterAsk(ask) }
            cluster.start()
        }
        liveness.start()
        shedder.start()
        operators.startSampling(runtime: runtime, streams: streams)
    }

    /// Safe from any thread and from signal handlers.
    public static func requestStop() {
        requestStopFromSignal()
    }

    /// The listening socket is dual-stack: IPv4 addresses arrive as `::ffff:a.b.c.d`; this gives
    /// the plain form (for configuring trusted proxies).
    public static func plainAddress(_ address: String) -> String { ClientAddress.plain(address) }

    /// Services the loop until the server has stopped. Call on the thread that called `start()`.
    public func run() {
        if let refused = ThreadScheduling.preferLatency() { logger.debug("the loop thread keeps the default time slice (\(refused))") }
        let result = runtime.run()
        if result != 0 { logger.error("the event loop still had handles when it closed (libuv error \(result))") }
        storage.stop(engine: engine)
        contextSetup = nil
        logger.info("server stopped")
    }

    /// Storage made every step up to `sequence` durable (posted by the storage thread).
    private func durable(upTo sequence: UInt64) {
        outbox.durable(upTo: sequence)
        responder.durable(upTo: sequence)
        webSocket.throttle.backlogChanged()
    }

    /// The end of each turn of the loop: the turn's frames go out, one send per connection; slow
    /// readers found meanwhile leave the engine (which may make more frames); the turn's changes
    /// go to storage together.
    private func endOfTurn() {
        outbox.flush()
        var wake = outbox.needsLWSWake
        // (The next turn's accepts: this runs just before the loop polls again.)
        if acceptGovernor?.turnBegins() == true { wake = true }
        while outbox.hasDropped {
            steps.run()
            outbox.flush()
            wake = wake || outbox.needsLWSWake
        }
        storage.handOver()
        if webSocket.throttle.backlogChanged() { wake = true }
        if webSocket.throttle.turnEnded() { wake = true }
        // lws arms timeouts set outside its callbacks (a slow reader's drop), and reads what it
        // buffered for connections read again, only when woken.
        if wake { runtime.wake() }
    }

    /// The loop was woken (`EVENT_WAIT_CANCELLED`): a signal's stop or reload.
    func woken() {
        if stopRequested.load(ordering: .relaxed) { beginShutdown() }
        if reloadRequested.exchange(false, ordering: .relaxed),
           reloader.reload(engine: engine, context: runtime.context, configuration: configuration,
                           limitEventLog: steps.limitEventLog, logger: logger) {
            steps.run()
        }
    }

    /// Say goodbye (flush what is queued, then close with 1001), then destroy the context shortly
    /// after, inside the loop.
    private func beginShutdown() {
        guard !runtime.isShuttingDown, !shutdownBegun else { return }
        shutdownBegun = true
        logger.info("stopping: closing \(table.count) connections with 1001 going away")
        for connection in table.all where connection.closing == nil {
            outbox.close(connection, .goingAway, reason: "server shutting down")
        }
        let goodbyes: Int64 = table.count == 0 ? 1 : 250_000
        guard let cluster else { return runtime.shutdown(afterMicroseconds: goodbyes) }
        // The goodbyes first (their held ops reach Redis), then LEAVE: the survivors adopt what
        // is left here.
        let leave = runtime.makeTimer { [unowned self] in
            steps.run()
            cluster.leaveAll { [unowned self] in runtime.shutdown(afterMicroseconds: 1) }
        }
        leave.schedule(afterMicroseconds: goodbyes)
    }

    private var shutdownBegun = false
}

/// Bytes received on `socket` that nobody has read yet (`FIONREAD`).
private func unreadBytes(onSocket socket: Int32) -> Int {
    var count: Int32 = 0
    return ioctl(socket, UInt(FIONREAD), &count) == 0 ? Int(count) : 0
}

/// The frame tap's report (see `MaskTap.onViolation`), a global function so it converts to `@convention(c)`.
private func tapViolation(_ context: UnsafeMutableRawPointer?, _ socket: Int32) {
    guard let context else { return }
    Unmanaged<LWSServer>.fromOpaque(context).takeUnretainedValue().webSocket.frameViolation(onSocket: socket)
}

public enum ServerError: Error, CustomStringConvertible {
    case startFailed(String)
    public var description: String {
        switch self {
        case .startFailed(let message): return message
        }
    }
}
