import Dispatch
import Glibc
import PresenceCore
import PresenceWire

/// The thin shell around ``ClientConnection``: one ``WebSocketClient`` (one service thread), a
/// periodic tick for timers, and the effects performed in order.
///
/// Threading: everything runs on the transport's service thread. Event handlers are called there;
/// ``withConnection(_:)`` and ``connection`` may only be used there; from any other thread use
/// ``perform(_:)``. Never blocks the loop.
public final class ClientRuntime: @unchecked Sendable {
    /// Called on the service thread for every ``ClientEvent``.
    public typealias EventHandler = (ClientRuntime, ClientEvent) -> Void
    /// Called on the service thread at every tick with `now` (ms since the epoch).
    public typealias TickHandler = (ClientRuntime, Int64) -> Void

    private var transport: WebSocketClient?
    /// Service thread only.
    public private(set) var connection: ClientConnection
    private var currentID: WebSocketConnectionID?
    private var eventHandler: EventHandler = { _, _ in }
    private var tickHandler: TickHandler = { _, _ in }
    private var signalHandler: (@Sendable (Int32) -> Void)?
    private let clock: @Sendable () -> Int64

    /// - Parameters:
    ///   - tickMilliseconds: timer resolution.
    ///   - clock: ms since the epoch (the real-time clock by default).
    public init(configuration: ClientConfiguration, tickMilliseconds: UInt64 = 50,
                connectTimeoutSeconds: UInt32 = 10,
                clock: @escaping @Sendable () -> Int64 = ClientRuntime.realTimeMilliseconds,
                signalHandler: (@Sendable (Int32) -> Void)? = nil) {
        self.connection = ClientConnection(configuration: configuration)
        self.clock = clock
        var cfg = WebSocketClientConfiguration()
        cfg.tickIntervalMicroseconds = tickMilliseconds * 1000
        cfg.connectTimeoutSeconds = connectTimeoutSeconds
        cfg.rxBufferSize = 16 * 1024
        cfg.raiseFileLimit = false
        cfg.signalHandler = signalHandler
        cfg.caFile = configuration.caFile
        cfg.insecureSkipVerify = configuration.insecureSkipVerify
        cfg.userAgent = configuration.userAgent
        // Fragments are joined up to the same limit as count-prefixed pieces (ClientConnection).
        cfg.maxMessageBytes = connection.maxMessageBytes
        // nil when the process cannot create an event loop (no file descriptors left): start() says so.
        transport = try? WebSocketClient(configuration: cfg) { [weak self] _, event in
            self?.handle(event)
        }
    }

    /// Milliseconds since the epoch (`CLOCK_REALTIME`).
    @Sendable public static func realTimeMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    public var now: Int64 { clock() }

    /// Starts the service thread and the first connection. Handlers run on the service thread.
    public func start(onEvent: @escaping EventHandler, onTick: @escaping TickHandler = { _, _ in },
                      setup: @escaping (ClientRuntime) -> Void = { _ in }) throws {
        eventHandler = onEvent
        tickHandler = onTick
        guard let transport else { throw WebSocketClientError.contextCreationFailed("cannot create an event loop") }
        try transport.start()
        let box = UncheckedBox(setup)
        transport.perform { [self] in
            box.value(self)
            withConnection { c, now in c.start(now: now) }
        }
    }

    /// Runs `body` on the service thread.
    public func perform(_ body: @escaping @Sendable (ClientRuntime) -> Void) {
        transport?.perform { [self] in body(self) }
    }

    /// Service thread only: changes the connection, then performs the effects it produced.
    @discardableResult
    public func withConnection<T>(_ body: (inout ClientConnection, Int64) -> T) -> T {
        let result = body(&connection, clock())
        runEffects()
        return result
    }

    /// Stops the service thread (open sockets are dropped). Not on the service thread.
    public func shutdown() {
        transport?.shutdown()
    }

    // MARK: internals

    private func runEffects() {
        let effects = connection.drainEffects()
        for effect in effects { perform(effect) }
    }

    private func perform(_ effect: ClientEffect) {
        guard let transport else { return }
        switch effect {
        case .open(let url):
            if let id = currentID { transport.abort(id) }
            currentID = transport.connect(to: url)
        case .send(let text):
            // Requests are never larger than ClientConfiguration.largestMessageBytes, so they split.
            guard let id = currentID, let frames = FrameSplitter.frames(for: text) else { return }
            for frame in frames { transport.send(id, bytes: frame) }
        case .close:
            if let id = currentID { transport.close(id) }
        case .abort:
            if let id = currentID { transport.abort(id, mode: .fin) }
            currentID = nil
        case .pause:
            if let id = currentID { transport.pause(id) }
        case .resume:
            if let id = currentID { transport.resume(id) }
        case .deliver(let event):
            eventHandler(self, event)
        }
    }

    private func handle(_ event: WebSocketClientEvent) {
        switch event {
        case .connected(let id):
            guard id == currentID else { return }
            withConnection { c, now in c.transportOpened(now: now) }
        case .connectFailed(let id, let reason):
            guard id == currentID else { return }
            currentID = nil
            withConnection { c, now in c.transportFailed(reason: reason, now: now) }
        case .message(let id, let message):
            guard id == currentID, !message.isBinary else { return }
            withConnection { c, now in c.received(message.copyBytes(), now: now) }
        case .closed(let id, let info):
            guard id == currentID else { return }
            currentID = nil
            if info.messageTooLarge {
                withConnection { c, now in c.messageTooLarge(now: now) }
            } else {
                let serverClose = info.peerCloseCode.map { ServerClose(code: Int($0), reason: info.peerCloseReason) }
                withConnection { c, now in c.transportClosed(reason: Self.describe(info), serverClose: serverClose, now: now) }
            }
        case .tick:
            let now = clock()
            if let deadline = connection.nextDeadline, now >= deadline {
                withConnection { c, now in c.timerFired(now: now) }
            }
            tickHandler(self, now)
        }
    }

    static func describe(_ info: WebSocketCloseInfo) -> String {
        if let code = info.peerCloseCode {
            let why: String? = switch info.closeCode {
            case .goingAway: "the server is shutting down"
            case .replaced: "replaced by a newer connection of this client"
            case .closedByOperator: "closed by an operator"
            case .policyViolation: "policy violation"
            case .messageTooBig: "a message was too big"
            default: nil
            }
            let detail = [why, info.peerCloseReason.isEmpty ? nil : info.peerCloseReason].compactMap { $0 }
            return "closed by the server (code \(code)\(detail.isEmpty ? "" : ": " + detail.joined(separator: "; ")))"
        }
        if info.closedLocally { return "closed" }
        if info.byShutdown { return "client shut down" }
        return "connection lost"
    }
}

/// Moves a non-Sendable value to the service thread (used once, there).
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
