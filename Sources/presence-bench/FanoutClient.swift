import ArgumentParser
import PresenceClient

/// The generator's WebSocket transport: `lws` (PresenceClient's `WebSocketClient`, the old one) or
/// `epoll` (``EpollWebSocketClient``, lean enough to read 200k messages/s on one core).
enum TransportChoice: String, ExpressibleByArgument, CaseIterable, Sendable {
    case lws, epoll
}

/// What a fan-out generator sees of its transport. Events arrive on the transport's own thread.
enum FanoutEvent {
    case connected(WebSocketConnectionID)
    case connectFailed(WebSocketConnectionID, reason: String)
    /// A whole message; the bytes are borrowed for the call.
    case message(WebSocketConnectionID, UnsafeRawBufferPointer)
    /// An established connection ended; `unexpected` when we did not close it.
    case closed(WebSocketConnectionID, unexpected: Bool)
    case tick(nowMicros: UInt64)
}

/// Counters of a transport; deltas between two snapshots show the measured window.
struct TransportCounters: Sendable {
    var messagesReceived = 0
    var bytesReceived = 0
    var messagesSent = 0
    /// `send` system calls (epoll only: one per connection per loop turn at most).
    var sendCalls = 0
    /// Flushes that left bytes queued because the peer's socket buffer was full (epoll only).
    var blockedSends = 0
    var loopTurns = 0
    // Peaks since `resetPeaks` (epoll only; not deltas):
    /// The most bytes queued for one connection.
    var maxQueuedBytes = 0
    /// The longest loop turn's work (events, tick, flush), and the longest `epoll_wait` (its
    /// timeout is at most 1 ms when a tick is due: a longer one means the thread was not scheduled).
    var longestTurnMicros = 0
    var longestWaitMicros = 0

    static func - (a: TransportCounters, b: TransportCounters) -> TransportCounters {
        TransportCounters(
            messagesReceived: a.messagesReceived - b.messagesReceived, bytesReceived: a.bytesReceived - b.bytesReceived,
            messagesSent: a.messagesSent - b.messagesSent, sendCalls: a.sendCalls - b.sendCalls,
            blockedSends: a.blockedSends - b.blockedSends, loopTurns: a.loopTurns - b.loopTurns,
            maxQueuedBytes: a.maxQueuedBytes, longestTurnMicros: a.longestTurnMicros, longestWaitMicros: a.longestWaitMicros)
    }
}

/// The operations the fan-out generators need, implemented by both transports.
protocol FanoutClient: AnyObject, Sendable {
    var transport: TransportChoice { get }
    /// Starts connecting; call on the transport's thread (in `perform` or an event).
    func connect(to url: WebSocketURL, sourceAddress: String?) -> WebSocketConnectionID
    func send(_ id: WebSocketConnectionID, text: String)
    func send(_ id: WebSocketConnectionID, binary: UnsafeRawBufferPointer)
    /// Runs `body` on the transport's thread.
    func perform(_ body: @escaping @Sendable () -> Void)
    /// Closes every connection with a close frame.
    func closeAll()
    /// Established connections not yet closed (any thread).
    var openConnections: Int { get }
    /// Read on the transport's thread.
    var counters: TransportCounters { get }
    /// Starts the peak counters afresh (on the transport's thread).
    func resetPeaks()
    func shutdown()
}

typealias FanoutHandler = @Sendable (any FanoutClient, FanoutEvent) -> Void

extension ServerOptions {
    /// A started client of the chosen transport, with a 1 ms tick, asking for `subprotocol`.
    func fanoutClient(_ transport: TransportChoice, subprotocol: String?, handler: @escaping FanoutHandler) throws -> any FanoutClient {
        switch transport {
        case .lws:
            let c = try LWSFanoutClient(configuration: clientConfiguration(tickMicros: 1000).with(subprotocol: subprotocol), handler: handler)
            try c.start()
            return c
        case .epoll:
            var cfg = EpollWebSocketClient.Configuration()
            cfg.maxHandshakesInFlight = maxInFlight
            cfg.subprotocol = subprotocol
            cfg.tickMicros = 1000
            let c = EpollWebSocketClient(configuration: cfg, handler: handler)
            try c.start()
            return c
        }
    }
}

/// The lws transport behind ``FanoutClient``.
final class LWSFanoutClient: FanoutClient, @unchecked Sendable {
    let transport = TransportChoice.lws
    private var client: WebSocketClient!

    init(configuration: WebSocketClientConfiguration, handler: @escaping FanoutHandler) throws {
        client = try WebSocketClient(configuration: configuration) { [unowned self] _, event in
            switch event {
            case .connected(let id): handler(self, .connected(id))
            case .connectFailed(let id, let reason): handler(self, .connectFailed(id, reason: reason))
            case .message(let id, let m): handler(self, .message(id, m.bytes))
            case .closed(let id, let info):
                handler(self, .closed(id, unexpected: !info.closedLocally && !info.byShutdown && !info.aborted))
            case .tick(let now): handler(self, .tick(nowMicros: now))
            }
        }
    }

    func start() throws { try client.start() }
    func connect(to url: WebSocketURL, sourceAddress: String?) -> WebSocketConnectionID { client.connect(to: url, sourceAddress: sourceAddress) }
    func send(_ id: WebSocketConnectionID, text: String) { client.send(id, text: text) }
    func send(_ id: WebSocketConnectionID, binary: UnsafeRawBufferPointer) { client.send(id, bytes: Array(binary), binary: true) }
    func perform(_ body: @escaping @Sendable () -> Void) { client.perform(body) }
    func closeAll() { client.closeAll() }
    var openConnections: Int { client.statistics.open }
    var counters: TransportCounters {
        let s = client.statistics
        return TransportCounters(messagesReceived: s.messagesReceived, bytesReceived: s.bytesReceived, messagesSent: s.messagesSent)
    }
    func resetPeaks() {}
    func shutdown() { client.shutdown() }
}
