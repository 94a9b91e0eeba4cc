import CLibWebSockets
import Logging
import PresenceCore
import PresenceWire

/// WebSocket connections on `/.ws`, inbound: the upgrade (path and per-address limits), the
/// connection's arrival in the table and the engine, each received message (joined, decoded,
/// handled by the engine), and its departure. What goes out is the outbound path's (`Outbox`).
final class WebSocketRoute {
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let metrics: ServerMetrics
    private let engine: Engine
    private let table: ConnectionTable
    private let outbox: Outbox
    private let steps: EngineSteps
    let throttle: InboundThrottle
    private let shedder: WriteShedder
    private var admission: AddressAdmission
    private(set) var messagesReceived = 0
    private(set) var bytesReceived = 0
    /// The port actually bound: the hello's host when the client sent no `Host`.
    var boundPort = 0

    init(configuration: ServerConfiguration, logger: Logger, metrics: ServerMetrics, engine: Engine,
         table: ConnectionTable, outbox: Outbox, steps: EngineSteps, throttle: InboundThrottle, shedder: WriteShedder) {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.engine = engine
        self.table = table
        self.outbox = outbox
        self.steps = steps
        self.throttle = throttle
        self.shedder = shedder
        admission = AddressAdmission(maxConnections: configuration.maxConnectionsPerAddress,
                                     maxPerSecond: configuration.maxConnectionRatePerAddress)
    }

    /// Only `/.ws` upgrades, within the per-address limits; anything else is refused during the
    /// handshake (non-zero return).
    func filterUpgrade(_ wsi: OpaquePointer) -> Int32 {
        let uri = LWSRead.header(wsi, WSI_TOKEN_GET_URI) ?? ""
        guard uri == "/.ws" || uri.hasPrefix("/.ws?") || uri.hasPrefix("/.ws/") else {
            logger.notice("refused WebSocket upgrade on \(uri): only /.ws is served")
            _ = lws_return_http_status(wsi, 404, "WebSockets are served on /.ws only")
            return 1
        }
        guard admission.isActive else { return 0 }
        let address = LWSRead.clientAddress(wsi, trustedProxies: configuration.trustedProxies)
        switch admission.admit(address, live: table.liveConnections(from: address), nowMilliseconds: WallClock.nowMilliseconds()) {
        case .admit:
            return 0
        case let .refuse(reason, log):
            if log { logger.notice("refusing connections from \(address): \(reason)") }
            _ = lws_return_http_status(wsi, 429, "Too many connections: \(reason)")
            return 1
        }
    }

    func established(_ wsi: OpaquePointer, user: UnsafeMutableRawPointer?) {
        let id = table.nextID()
        user?.storeBytes(of: id, as: UInt64.self)
        let now = WallClock.nowMilliseconds()
        let remote = LWSRead.clientAddress(wsi, trustedProxies: configuration.trustedProxies)
        let connection = ShellConnection(id: id, wsi: wsi, socket: MaskTap.established(wsi, id: id), remote: remote,
                                         userAgent: table.intern(userAgent: LWSRead.header(wsi, WSI_TOKEN_HTTP_USER_AGENT)),
                                         now: now, maxMessageBytes: configuration.maxMessageBytes,
                                         budget: MessageBudget(perSecond: configuration.maxMessagesPerSecond, burst: configuration.messageBurst, now: now))
        table.insert(connection)
        metrics.connectionsOpened.increment()
        // Frames sent along with the upgrade request were followed just now.
        frameViolation(onSocket: connection.socket)

        let version = LWSRead.urlArgument(wsi, "v")
        let namespace = LWSRead.urlArgument(wsi, "ns")
        let lastSession = LWSRead.urlArgument(wsi, "ls")
        let host = LWSRead.header(wsi, WSI_TOKEN_HOST) ?? "\(configuration.host):\(boundPort)"
        let session = engine.open(ConnectionID(id), namespace: namespace, lastSession: lastSession, host: host, now: now)
        logger.info("connection opened", metadata: [
            "conn": "\(id)", "session": "\(session)", "remote": "\(remote)", "ns": "\(namespace ?? "")",
            "ls": "\(lastSession ?? "")",
        ])
        if let version, version != "5" {
            logger.notice("closing connection \(id): unsupported protocol version v=\(version)")
            outbox.perform([.send([ConnectionID(id)], .shutdown(reason: "Unsupported protocol version \(version); this server speaks v=5")),
                            .close(ConnectionID(id), code: .policyViolation, reason: "unsupported protocol version")])
        } else if engine.nodeID != nil, let namespace, namespace.utf8.count > Self.maxClusterNamespaceBytes {
            // A cluster keeps each namespace under Redis keys, which bound the name.
            logger.notice("closing connection \(id): namespace name of \(namespace.utf8.count) bytes")
            outbox.perform([.send([ConnectionID(id)], .shutdown(reason: "Namespace names are at most \(Self.maxClusterNamespaceBytes) bytes")),
                            .close(ConnectionID(id), code: .policyViolation, reason: "namespace name too long")])
        } else if let namespace = namespace ?? Optional(configuration.defaultNamespace), isRefused(namespace) {
            // Redis lost this namespace's history (ClusterRefusals.swift); logged once there.
            outbox.perform([.send([ConnectionID(id)], .serverError(NamespaceRefusals.clientMessage(namespace))),
                            .close(ConnectionID(id), code: .internalError, reason: "namespace unavailable")])
        }
        steps.run()
    }

    static let maxClusterNamespaceBytes = 512
    /// A cluster node refuses namespaces whose history Redis lost (set by the server).
    var isRefused: (String) -> Bool = { _ in false }

    /// One received fragment.
    func receive(_ id: UInt64, wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let connection = table[id], connection.closing == nil else { return 0 }
        if MaskTap.sawUnmaskedFrame(connection.socket) {
            refuse(connection, .protocolError, reason: "frames from a client must be masked",
                   log: "sent an unmasked frame (frames from a client must be masked)")
            return 0
        }
        if LWSRead.isBinaryFrame(wsi) {
            refuse(connection, .unsupportedData, reason: "binary frames are not supported", log: "sent a binary frame")
            return 0
        }
        connection.liveness.heard(at: WallClock.nowMilliseconds())
        connection.bytesIn += length
        bytesReceived += length
        metrics.bytesIn.increment(by: length)
        let fragment = UnsafeRawBufferPointer(start: length > 0 ? input : nil, count: length)
        let messageEnds = LWSRead.messageEnds(wsi)
        var handlingNanoseconds: UInt64 = 0
        defer {
            if connection.closing == nil {
                throttle.charge(connection, bytes: length, endsMessage: messageEnds, handlingNanoseconds: handlingNanoseconds)
                throttle.handled(connection, nanoseconds: handlingNanoseconds)
            }
        }
        switch connection.receiver.receive(fragment, messageEnds: messageEnds, announced: LWSRead.remainingInFrame(wsi)) {
        case .nothing:
            break
        case .message(let bytes):
            let started = MonotonicClock.nanoseconds()
            handle(bytes, on: connection)
            handlingNanoseconds = MonotonicClock.nanoseconds() &- started
        case .tooLarge:
            let limit = configuration.maxMessageBytes
            refuse(connection, .messageTooBig, reason: FrameAssembler.Failure.tooLarge(limit: limit).description, log: "sent a message over \(limit) bytes")
        case .piecesTooLarge(let error):
            refuse(connection, .messageTooBig, reason: error.description, log: "sent a multi-frame \(error)")
        }
        return 0
    }

    /// One whole protocol message: decode, let the engine handle it, perform what it produced.
    private func handle(_ bytes: [UInt8], on connection: ShellConnection) {
        let id = ConnectionID(connection.id)
        connection.lastFrameAt = WallClock.nowMilliseconds()
        messagesReceived += 1
        metrics.messagesIn.increment()
        let arrivedAt = MonotonicClock.nanoseconds()
        let message: ClientMessage
        do {
            message = try RequestDecoder.decode(bytes)
        } catch {
            refuse(connection, .invalidPayload, reason: "invalid message: \(error.reason)", log: "sent an undecodable message (\(error.reason))")
            return
        }
        // Only a write's pushes count toward write-to-push (not a listen's initial data).
        var writeStartedAt: UInt64?
        let addressedBefore = outbox.addressedBytes
        var shed = false
        switch message {
        case .ping:
            engine.ping(id)
        case .ignoredControl:
            break
        case .request(let request) where request.request.isWrite && !shedder.admit(connection: connection.id):
            // Past saturation (WriteShedding): refused at once, changing nothing. Only data writes;
            // onDisconnect registrations, listens and auth are never shed.
            shed = true
            if let number = request.number {
                outbox.perform([.send([id], .reply(number: number, result: .failure(.unavailable(WriteShedder.message))))])
            }
        case .request(let request):
            if Self.isWrite(request.request) {
                writeStartedAt = arrivedAt
                if let number = request.number { outbox.expectAck(number, on: connection, startedAt: arrivedAt) }
            }
            engine.handle(request, from: id, now: WallClock.nowMilliseconds())
        case let .invalidRequest(number, action, error):
            let text = WireStatus.failure(for: error).message
            logger.notice("rejected request", metadata: [
                "conn": "\(connection.id)", "r": "\(number.map(String.init) ?? "-")", "a": "\(action ?? "-")", "error": "\(text)",
            ])
            if let number {
                outbox.perform([.send([id], .reply(number: number, result: .failure(error)))])
            } else {
                outbox.perform([.send([id], .serverError(text))])
            }
        }
        steps.run(writeStartedAt: writeStartedAt)
        // Past saturation, a writer is read no more until the backlog drains (WriterPushback).
        if writeStartedAt != nil || shed {
            throttle.wrote(connection, queuedBytes: shed ? nil : outbox.addressedBytes &- addressedBefore)
        }
    }

    static func isWrite(_ request: Request) -> Bool {
        switch request {
        case .put, .merge, .onDisconnectPut, .onDisconnectMerge, .onDisconnectCancel: return true
        default: return false
        }
    }

    /// Tells the client why, then closes; logged once.
    func refuse(_ connection: ShellConnection, _ code: CloseCode, reason: String, log: String) {
        logger.notice("closing connection \(connection.id) (\(connection.remote)): it \(log)")
        outbox.perform([.send([ConnectionID(connection.id)], .serverError(reason)),
                        .close(ConnectionID(connection.id), code: code, reason: reason)])
    }

    /// A PONG arrived: the peer is alive.
    func heard(_ id: UInt64) {
        table[id]?.liveness.heard(at: WallClock.nowMilliseconds())
    }

    /// The peer sent a close frame. When the server's own close went out first, this is the
    /// answer to it: the connection ends now (-1). Otherwise lws answers it; its code is kept for
    /// the close's log line.
    func peerClosing(_ id: UInt64, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let connection = table[id] else { return 0 }
        if connection.closeSentAt != nil { return -1 }
        var code = CloseCode.noStatus.rawValue
        if let input, length >= 2 {
            let bytes = input.assumingMemoryBound(to: UInt8.self)
            code = Int(bytes[0]) << 8 | Int(bytes[1])
        }
        outbox.peerClosed(connection, code: code)
        return 0
    }

    /// The frame tap saw a frame that lws 4.1.6 answers by dropping the connection without a close
    /// frame (`MaskTap`): send the close frame RFC 6455 asks for first. Runs inside lws's read of
    /// that socket; lws then drops the connection (or, for a close frame, ends it at once).
    func frameViolation(onSocket socket: Int32) {
        guard let connection = table[MaskTap.owner(socket)], connection.closeSentAt == nil,
              let (code, reason) = MaskTap.violation(socket) else { return }
        logger.notice("closing connection \(connection.id) (\(connection.remote)): it sent a \(reason)")
        outbox.closeNow(connection, code: code, reason: reason)
    }

    /// The socket closed (any way): the connection leaves the table and the engine, which runs its
    /// onDisconnect ops.
    func closed(_ id: UInt64) {
        guard let connection = table.remove(id) else { return }
        outbox.closed(connection)
        MaskTap.closed(connection.socket)
        throttle.closed(id)
        shedder.closed(id)
        let reason = connection.closing.map { "\($0.code) \($0.reason)" } ?? "socket closed"
        metrics.closed(reason: connection.closing.map { $0.reason == "peer closed" ? "client_close" : "server_\($0.code)" } ?? "socket_closed")
        engine.disconnect(ConnectionID(id), now: WallClock.nowMilliseconds())
        logger.info("connection closed", metadata: ["conn": "\(id)", "remote": "\(connection.remote)", "reason": "\(reason)"])
        steps.run()
    }
}
