import PresenceCore
import PresenceWire

/// This client's version, sent in its `User-Agent` (`presence-client/<version>`).
public enum PresenceClientVersion {
    public static let current = "0.1.0"
}

/// Identifies a listener registered with ``ClientConnection/listen(_:now:)``.
public typealias ListenerID = Int
/// Identifies a write (`set`, `update`, `remove`) until it is acknowledged.
public typealias WriteID = Int
/// Identifies an onDisconnect registration.
public typealias OnDisconnectID = Int
/// Identifies a one-shot read.
public typealias GetID = Int

/// Settings of a ``ClientConnection``.
public struct ClientConfiguration: Sendable {
    /// The server (`ws://host:port`); the path is always `/.ws`.
    public var server: WebSocketURL
    /// The database (`ns`); nil or empty means the server's default database.
    public var namespace: String?
    /// The credential sent after every hello (`auth` for JWTs, `gauth` otherwise, e.g. `owner`).
    public var credential: String?
    public var backoff = Backoff.Policy()
    /// Send the bare `"0"` keepalive after this long without traffic (§2.5).
    public var keepaliveMilliseconds: Int64 = 45_000
    /// After the network comes back, a ping must be answered within this long, else the connection
    /// is declared dead and replaced.
    public var probeTimeoutMilliseconds: Int64 = 3_000
    /// An opened socket must deliver the hello within this long.
    public var helloTimeoutMilliseconds: Int64 = 10_000
    /// Give up (``ClientEvent/fatal(_:)``) when the very first connection cannot be made, instead of
    /// retrying: what one-shot commands want.
    public var failFast = false
    /// Give up when the server rejects or revokes the credential (there is no way to refresh it).
    public var stopOnAuthFailure = true
    /// TLS (`wss://`): trust this PEM CA file (nil: the system's), or skip verification entirely.
    public var caFile: String?
    public var insecureSkipVerify = false
    /// The largest message taken from the server or sent to it, in bytes: a larger incoming message
    /// ends the connection with ``ClientEvent/fatal(_:)``, a larger request is refused before it is
    /// sent. Capped at ``largestMessageBytes``.
    public var maxMessageBytes = ClientConfiguration.defaultMaxMessageBytes
    public static let defaultMaxMessageBytes = 16 << 20
    /// The largest request the server is taken to accept, in bytes: a presence server's default
    /// `--max-message-bytes`. A larger request is refused before it is sent, as one over
    /// ``maxMessageBytes`` is. When the server closes with 1009 stating a smaller limit, the client
    /// adopts that (see ``ClientConnection/transportClosed(reason:serverClose:now:)``).
    public var maxRequestBytes = ClientConfiguration.defaultMaxRequestBytes
    public static let defaultMaxRequestBytes = FrameAssembler.defaultMaxMessageBytes
    /// The `User-Agent` of the WebSocket handshake (operators see it beside each connection).
    public var userAgent: String? = "presence-client/\(PresenceClientVersion.current)"

    /// The largest message `FrameSplitter` can always send: at most `maxPieces` frames, each at least
    /// `maxFrameBytes - 3` bytes (a cut backs up over at most three UTF-8 continuation bytes).
    public static let largestMessageBytes = (FrameSplitter.maxFrameBytes - 3) * FrameSplitter.maxPieces

    public init(server: WebSocketURL, namespace: String? = nil, credential: String? = nil) {
        self.server = server
        self.namespace = namespace
        self.credential = credential
    }

    /// `ws://host:port/.ws?v=5[&ls=S][&ns=NS]`.
    public func url(lastSession: String?) -> WebSocketURL {
        var query = "/.ws?v=5"
        if let ls = lastSession, !ls.isEmpty { query += "&ls=\(ls)" }
        if let ns = namespace, !ns.isEmpty { query += "&ns=\(ns)" }
        return server.with(pathAndQuery: query)
    }
}

/// What the connection tells the app about itself.
public enum ConnectionStatus: Equatable, Sendable {
    case connecting(attempt: Int)
    case connected(session: String)
    case disconnected(reason: String)
    case reconnecting(inMilliseconds: Int64)
    /// Disconnected while the network is off: nothing is attempted until it comes back.
    case waitingForNetwork
    case stopped
}

/// The close frame the server ended a connection with.
public struct ServerClose: Equatable, Sendable {
    /// Its code (1005 when the frame had none).
    public var code: Int
    /// Its reason text (the server says why, e.g. "message larger than 1048576 bytes").
    public var reason: String

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The code by name, when it is one this server sends.
    public var closeCode: CloseCode? { CloseCode(rawValue: code) }
}

/// A request the server refused: its status (`permission_denied`, …) and message.
public struct RequestFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var status: String
    public var message: String

    public init(status: String, message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { message.isEmpty ? status : "\(status): \(message)" }
}

/// Events for the app, delivered through ``ClientEffect/deliver(_:)`` in order.
public enum ClientEvent: Equatable, Sendable {
    case status(ConnectionStatus)
    /// The server accepted the credential; `auth` is its reply data.
    case authenticated(JSON)
    /// The server rejected the credential (`invalid_token`, `expired_token`, …).
    case authFailed(RequestFailure)
    /// The server revoked the credential on a live connection (`ac`).
    case authRevoked(RequestFailure)
    /// The value at a listener's path, whenever it changes (the first one after the listen).
    case value(listener: ListenerID, path: Path, value: JSON)
    /// A listen refused, or revoked by the server (`c`); the listener is gone.
    case listenFailed(listener: ListenerID, path: Path, RequestFailure)
    /// A write was sent on the current connection (as request `request`).
    case writeSent(WriteID, request: Int)
    /// A write's ack (nil) or its refusal.
    case writeCompleted(WriteID, RequestFailure?)
    /// An onDisconnect registration (or cancel) ack'd (nil) or refused.
    case onDisconnectCompleted(OnDisconnectID, RequestFailure?)
    /// A one-shot read's result.
    case getCompleted(GetID, JSON?, RequestFailure?)
    /// Server diagnostics (`e` control messages, `sd` pushes).
    case serverMessage(String)
    /// The client gave up (first connection refused with `failFast`, credential refused, server
    /// shutdown). The connection is stopped.
    case fatal(String)
}

/// What the shell must do, in order.
public enum ClientEffect: Equatable, Sendable {
    /// Open a new transport to this URL (any previous one is gone).
    case open(WebSocketURL)
    /// Send one text message on the current transport (split into frames by the shell with
    /// `PresenceWire`'s `FrameSplitter`; it always fits, see ``ClientConfiguration/largestMessageBytes``).
    case send(String)
    /// Close the current transport cleanly (close frame).
    case close
    /// Drop the current transport without a close frame; no further event for it is wanted.
    case abort
    /// Stop all traffic on the current transport without closing it (reads and writes).
    case pause
    /// Undo ``pause``.
    case resume
    /// Hand an event to the app.
    case deliver(ClientEvent)
}
