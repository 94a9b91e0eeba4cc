import Glibc
import PresenceCore
import Synchronization

/// Identifies one connection of a ``WebSocketClient``. Never 0, never reused within one client.
public typealias WebSocketConnectionID = UInt64

/// Settings fixed when a ``WebSocketClient`` is created.
///
/// The event loop is always libuv (it scales to tens of thousands of sockets; lws's default
/// `poll()` costs O(#fds) per wake-up).
public struct WebSocketClientConfiguration: Sendable {
    /// Connects beyond this many unfinished handshakes wait in a FIFO inside the transport.
    public var maxHandshakesInFlight: Int = 200
    /// Per-connection lws receive buffer (bytes). Larger messages arrive fragmented and are reassembled.
    public var rxBufferSize: Int = 1024
    /// lws gives up on a connect/handshake after this many seconds.
    public var connectTimeoutSeconds: UInt32 = 20
    /// If > 0, lws sends a WebSocket PING after this many idle seconds (client-side validity policy).
    public var pingIntervalSeconds: UInt16 = 0
    /// If > 0, lws drops a connection idle for this many seconds (needs `pingIntervalSeconds`).
    public var hangupSeconds: UInt16 = 0
    /// If > 0, the handler receives ``WebSocketClientEvent/tick(nowMicros:)`` at this period.
    public var tickIntervalMicroseconds: UInt64 = 0
    /// A message larger than this is not buffered: the rest of it is dropped and the connection
    /// closed with 1009 (``WebSocketCloseInfo/messageTooLarge``).
    public var maxMessageBytes: Int = 64 << 20
    /// Value of the `User-Agent` header, if any (operators see it beside each connection).
    public var userAgent: String? = nil
    /// Value of the `Origin` header, if any.
    public var origin: String? = nil
    /// lws log mask (`LLL_ERR | LLL_WARN` = 3 by default).
    public var lwsLogLevel: Int32 = 3
    /// Raise the soft `RLIMIT_NOFILE` to the hard limit when the client starts.
    public var raiseFileLimit: Bool = true
    /// SIGINT and SIGTERM, while the client runs, are passed here (on the service thread, through
    /// libuv signal watchers). When nil, the signal's default action runs (the process terminates).
    public var signalHandler: (@Sendable (Int32) -> Void)? = nil
    /// The `Sec-WebSocket-Protocol` to ask for (nil: none, as the Firebase SDKs send).
    public var subprotocol: String? = nil
    /// TLS (`wss://`): PEM file of the certificate authorities to trust; nil uses the system's.
    public var caFile: String? = nil
    /// TLS: accept any certificate (self-signed, expired, wrong host). For development only.
    public var insecureSkipVerify = false

    public init() {}
}

/// A received message. Its bytes are only valid during the handler call: copy what you keep.
public struct WebSocketMessage {
    /// The whole (reassembled) payload.
    public let bytes: UnsafeRawBufferPointer
    /// True for a binary message, false for text.
    public let isBinary: Bool

    /// The payload decoded as UTF-8 (a copy).
    public var text: String { String(decoding: bytes, as: UTF8.self) }
    /// A copy of the payload.
    public func copyBytes() -> [UInt8] { Array(bytes) }
}

/// How a connection ended.
public struct WebSocketCloseInfo: Sendable, Equatable {
    /// We called ``WebSocketClient/close(_:code:)``.
    public var closedLocally: Bool
    /// We called ``WebSocketClient/abort(_:mode:)`` (no close frame was sent).
    public var aborted: Bool
    /// The status code of a close frame the peer sent, if it sent one (1005, ``CloseCode/noStatus``,
    /// when its close frame had none).
    public var peerCloseCode: UInt16?
    /// The reason text of the peer's close frame (empty when it gave none).
    public var peerCloseReason = ""
    /// True when the client was shutting down and lws destroyed the connection.
    public var byShutdown: Bool
    /// The peer sent a message larger than ``WebSocketClientConfiguration/maxMessageBytes``: we
    /// closed with 1009.
    public var messageTooLarge = false

    /// The peer's close code by name, when it is one this server sends.
    public var closeCode: CloseCode? { peerCloseCode.flatMap { CloseCode(rawValue: Int($0)) } }
}

/// How ``WebSocketClient/abort(_:mode:)`` drops the TCP connection. Neither sends a close frame.
public enum WebSocketAbortMode: Sendable {
    /// `shutdown(fd, SHUT_RDWR)`: the peer sees FIN (like a killed process).
    case fin
    /// `SO_LINGER {1, 0}` then close: the peer sees RST.
    case reset
}

/// Events delivered on the service thread to the client's handler.
public enum WebSocketClientEvent {
    /// The WebSocket handshake completed; the connection can send.
    case connected(WebSocketConnectionID)
    /// TCP connect or handshake failed (or the client shut down before it finished).
    case connectFailed(WebSocketConnectionID, reason: String)
    /// A whole message (fragments reassembled). The bytes are borrowed for the call only.
    case message(WebSocketConnectionID, WebSocketMessage)
    /// An established connection is gone.
    case closed(WebSocketConnectionID, WebSocketCloseInfo)
    /// Periodic tick (see ``WebSocketClientConfiguration/tickIntervalMicroseconds``).
    case tick(nowMicros: UInt64)
}

/// An owned, `Sendable` copy of a ``WebSocketClientEvent``, for consumers on other threads.
public enum WebSocketOwnedEvent: Sendable {
    case connected(WebSocketConnectionID)
    case connectFailed(WebSocketConnectionID, reason: String)
    case message(WebSocketConnectionID, [UInt8], isBinary: Bool)
    case closed(WebSocketConnectionID, WebSocketCloseInfo)
    case tick(nowMicros: UInt64)

    /// Copies a borrowed event.
    public init(_ event: WebSocketClientEvent) {
        switch event {
        case .connected(let id): self = .connected(id)
        case .connectFailed(let id, let reason): self = .connectFailed(id, reason: reason)
        case .message(let id, let m): self = .message(id, m.copyBytes(), isBinary: m.isBinary)
        case .closed(let id, let info): self = .closed(id, info)
        case .tick(let now): self = .tick(nowMicros: now)
        }
    }
}

/// Counters of a ``WebSocketClient`` (read at any time, from any thread).
public struct WebSocketClientStatistics: Sendable {
    public var connectsRequested = 0
    public var connected = 0
    public var connectFailures = 0
    public var closed = 0
    public var messagesSent = 0
    public var messagesReceived = 0
    public var bytesSent = 0
    public var bytesReceived = 0
    /// Established and not yet closed.
    public var open: Int { connected - closed }
}

/// The live counters behind ``WebSocketClientStatistics`` (bumped on the service thread).
final class WebSocketClientCounters: Sendable {
    let connectsRequested = Atomic<Int>(0)
    let connected = Atomic<Int>(0)
    let connectFailures = Atomic<Int>(0)
    let closed = Atomic<Int>(0)
    let messagesSent = Atomic<Int>(0)
    let messagesReceived = Atomic<Int>(0)
    let bytesSent = Atomic<Int>(0)
    let bytesReceived = Atomic<Int>(0)

    var snapshot: WebSocketClientStatistics {
        var s = WebSocketClientStatistics()
        s.connectsRequested = connectsRequested.load(ordering: .relaxed)
        s.connected = connected.load(ordering: .relaxed)
        s.connectFailures = connectFailures.load(ordering: .relaxed)
        s.closed = closed.load(ordering: .relaxed)
        s.messagesSent = messagesSent.load(ordering: .relaxed)
        s.messagesReceived = messagesReceived.load(ordering: .relaxed)
        s.bytesSent = bytesSent.load(ordering: .relaxed)
        s.bytesReceived = bytesReceived.load(ordering: .relaxed)
        return s
    }
}

/// Monotonic clock in microseconds (`CLOCK_MONOTONIC`), shared by the transport and benchmarks.
@inline(__always)
public func monotonicMicros() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000 &+ UInt64(ts.tv_nsec) / 1000
}

/// Errors thrown by ``WebSocketClient/start()``.
public enum WebSocketClientError: Error, CustomStringConvertible {
    case contextCreationFailed(String)
    case alreadyStarted

    public var description: String {
        switch self {
        case .contextCreationFailed(let reason): reason
        case .alreadyStarted: "client already started"
        }
    }
}
