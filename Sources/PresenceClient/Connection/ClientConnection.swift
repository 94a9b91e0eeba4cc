import PresenceCore
import PresenceWire

/// The client's connection state machine: one connection carries every listener, write and
/// onDisconnect registration of the process, and survives any loss by reconnecting with backoff.
///
/// Pure: every input takes `now` (ms since the epoch) and appends ``ClientEffect``s, which the shell
/// drains with ``drainEffects()`` and performs in order. Time only moves through ``timerFired(now:)``
/// (call it at ``nextDeadline`` or on a periodic tick), randomness only through the injected source.
///
/// After every hello the connection re-authenticates and restores, in this order: every listener,
/// every onDisconnect registration still in force, every write not yet acknowledged (in the order
/// issued, including those issued while offline), every pending read. Reconnects name the previous
/// session with `ls=` so the server retires it at once.
///
/// The parts: this file (phases, lifecycle inputs, reconnecting), `+Requests` (what the app asks and
/// how it goes on the wire), `+Incoming` (frames, replies and pushes from the server).
public struct ClientConnection {
    public enum Phase: Equatable, Sendable {
        case idle
        /// Transport requested, not open yet.
        case connecting
        /// Transport open, waiting for the hello.
        case handshaking
        case connected
        case waitingToReconnect(at: Int64)
        case waitingForNetwork
        /// A clean close was requested; waiting for the transport to end.
        case stopping
        case stopped
    }

    public let configuration: ClientConfiguration
    public internal(set) var phase: Phase = .idle
    /// The `s` of the last hello (sent back as `ls=`).
    public private(set) var lastSession: String?
    /// `hello.ts - now` at the last hello.
    public private(set) var serverTimeOffset: Int64 = 0
    public private(set) var backoff: Backoff
    /// True while the app has turned the network off (``networkOff(now:)``).
    public private(set) var networkDown = false
    public private(set) var attempts = 0
    public var credential: String?
    /// The largest message taken in either direction (``ClientConfiguration/maxMessageBytes``,
    /// capped so that every message it allows can be split into frames).
    public let maxMessageBytes: Int
    /// The largest request sent: at most ``maxMessageBytes`` and what the server is known or taken
    /// to accept (``ClientConfiguration/maxRequestBytes``, or the limit a 1009 close stated).
    public internal(set) var maxRequestBytes: Int
    /// Where ``maxRequestBytes`` comes from (it names the limit when a request is refused).
    public internal(set) var requestLimit: RequestLimit
    /// The large write that was in flight when connections were lost in a row, and how many
    /// (``lostWithLargeWriteInFlight()``).
    var suspectWrite: (id: WriteID, losses: Int)?

    private var random: () -> Double
    var effects: [ClientEffect] = []
    var nextRequest = 1
    var nextID = 1
    var outstanding: [Int: Outstanding] = [:]
    /// Joins the server's count-prefixed messages; a fresh one per transport.
    var assembler: FrameAssembler
    private var everConnected = false
    private var connectedAt: Int64?
    var lastActivity: Int64 = 0
    var probeDeadline: Int64?
    private var helloDeadline: Int64?

    enum Outstanding {
        case auth, listen(Path), unlisten, write(WriteID), onDisconnect(OnDisconnectID), get(GetID)
    }

    struct View {
        var listeners: [ListenerID]
        var value: JSON = .null
        var hasValue = false
        var complete = false
    }
    var views: [Path: View] = [:]
    var viewOrder: [Path] = []
    var listenerPaths: [ListenerID: Path] = [:]

    public internal(set) var pendingWrites: [PendingWrite] = []
    public internal(set) var onDisconnectRegistrations: [OnDisconnectRegistration] = []
    var pendingGets: [(id: GetID, path: Path, request: Int?)] = []
    /// Requests refused on this side, reported on the next ``timerFired(now:)`` as a server's
    /// refusal would be: never before the call that made them has returned its id.
    var localRefusals: [ClientEvent] = []

    /// - Parameter random: a uniform source in [0, 1) for the backoff jitter.
    public init(configuration: ClientConfiguration, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.configuration = configuration
        self.credential = configuration.credential
        self.random = random
        self.backoff = Backoff(policy: configuration.backoff)
        self.maxMessageBytes = min(max(configuration.maxMessageBytes, 1), ClientConfiguration.largestMessageBytes)
        self.maxRequestBytes = min(max(configuration.maxRequestBytes, 1), maxMessageBytes)
        self.requestLimit = maxRequestBytes < maxMessageBytes ? .serverDefault : .client
        self.assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
    }


    /// Takes the effects accumulated since the last call.
    public mutating func drainEffects() -> [ClientEffect] {
        defer { effects.removeAll(keepingCapacity: true) }
        return effects
    }

    public var isConnected: Bool { phase == .connected }

    /// The listened paths, in the order they were first listened to.
    public var listenedPaths: [Path] { viewOrder }

    /// True when a write at `path` (or covering it) is waiting for its ack.
    public func hasPendingWrite(at path: Path) -> Bool {
        pendingWrites.contains { $0.path.contains(path) || path.contains($0.path) }
    }

    /// The earliest time ``timerFired(now:)`` has something to do.
    public var nextDeadline: Int64? {
        if !localRefusals.isEmpty { return 0 }  // due at once
        var deadlines: [Int64] = []
        if case .waitingToReconnect(let at) = phase { deadlines.append(at) }
        if phase == .handshaking, let h = helloDeadline { deadlines.append(h) }
        if phase == .connected {
            if let p = probeDeadline { deadlines.append(p) }
            if !networkDown { deadlines.append(lastActivity + configuration.keepaliveMilliseconds) }
        }
        return deadlines.min()
    }


    // MARK: lifecycle inputs

    /// Opens the first connection.
    public mutating func start(now: Int64) {
        guard phase == .idle else { return }
        if networkDown {
            phase = .waitingForNetwork
            deliver(.status(.waitingForNetwork))
        } else {
            connect(now: now)
        }
    }

    /// The transport's WebSocket handshake completed.
    public mutating func transportOpened(now: Int64) {
        guard phase == .connecting else { return }
        phase = .handshaking
        assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
        helloDeadline = now + configuration.helloTimeoutMilliseconds
        lastActivity = now
    }

    /// The transport could not connect.
    public mutating func transportFailed(reason: String, now: Int64) {
        switch phase {
        case .connecting, .handshaking:
            if configuration.failFast, !everConnected {
                giveUp("cannot connect to \(configuration.server.hostHeader): \(reason) (is presence-server running there?)")
            } else {
                lost(reason: reason, now: now)
            }
        case .stopping:
            finishStop()
        default:
            break
        }
    }

    /// The transport ended; `serverClose` is the close frame the server sent, if it sent one. A
    /// 1009 (message too big) close is handled first (``serverRefusedSize(_:now:)``).
    public mutating func transportClosed(reason: String, serverClose: ServerClose? = nil, now: Int64) {
        if let serverClose, serverClose.closeCode == .messageTooBig, phase == .handshaking || phase == .connected,
           !serverRefusedSize(serverClose, now: now) {
            return
        }
        if phase == .connected, serverClose == nil { lostWithLargeWriteInFlight() }
        switch phase {
        case .connecting, .handshaking, .connected:
            if configuration.failFast, !everConnected {
                giveUp("cannot connect to \(configuration.server.hostHeader): \(reason) (is presence-server running there?)")
            } else {
                lost(reason: reason, now: now)
            }
        case .stopping:
            finishStop()
        default:
            break
        }
    }


    /// Call at ``nextDeadline`` (calling early or often is harmless).
    public mutating func timerFired(now: Int64) {
        for refusal in localRefusals { deliver(refusal) }
        localRefusals.removeAll()
        switch phase {
        case .waitingToReconnect(let at) where now >= at:
            connect(now: now)
        case .handshaking:
            if let h = helloDeadline, now >= h {
                effects.append(.abort)
                lost(reason: "no hello from the server", now: now)
            }
        case .connected:
            if let p = probeDeadline, now >= p {
                probeDeadline = nil
                effects.append(.abort)
                lost(reason: "no reply from the server after the network came back", now: now)
            } else if !networkDown, now - lastActivity >= configuration.keepaliveMilliseconds {
                effects.append(.send(ClientCodec.keepalive))
                lastActivity = now
            }
        default:
            break
        }
    }

    /// Closes cleanly (close frame) and stops for good.
    public mutating func stop(now: Int64) {
        switch phase {
        case .connecting, .handshaking, .connected:
            if networkDown { effects.append(.resume) }
            phase = .stopping
            effects.append(.close)
        case .stopping, .stopped:
            break
        default:
            finishStop()
        }
    }

    /// Drops the socket with no close frame (like a killed process) and stops for good.
    public mutating func kill(now: Int64) {
        switch phase {
        case .connecting, .handshaking, .connected, .stopping:
            effects.append(.abort)
        default:
            break
        }
        if phase != .stopped { finishStop() }
    }

    /// The network goes away: no traffic on the socket (it stays open, so the server has to notice
    /// the silence), and no reconnect attempts until ``networkOn(now:)``.
    public mutating func networkOff(now: Int64) {
        guard !networkDown else { return }
        networkDown = true
        switch phase {
        case .connecting, .handshaking, .connected:
            effects.append(.pause)
        case .waitingToReconnect:
            phase = .waitingForNetwork
            deliver(.status(.waitingForNetwork))
        default:
            break
        }
    }

    /// The network is back: resume the socket and probe it with a ping; a dead one is replaced.
    public mutating func networkOn(now: Int64) {
        guard networkDown else { return }
        networkDown = false
        switch phase {
        case .connected:
            effects.append(.resume)
            effects.append(.send(ClientCodec.ping))
            probeDeadline = now + configuration.probeTimeoutMilliseconds
            lastActivity = now
        case .connecting, .handshaking:
            effects.append(.resume)
        case .waitingForNetwork:
            connect(now: now)
        default:
            break
        }
    }


    // MARK: reconnecting

    mutating func takeID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    mutating func deliver(_ event: ClientEvent) { effects.append(.deliver(event)) }

    private mutating func connect(now: Int64) {
        attempts += 1
        phase = .connecting
        probeDeadline = nil
        helloDeadline = nil
        deliver(.status(.connecting(attempt: attempts)))
        effects.append(.open(configuration.url(lastSession: lastSession)))
    }

    mutating func hello(session: String, serverTime: Int64, now: Int64) {
        phase = .connected
        helloDeadline = nil
        lastSession = session
        serverTimeOffset = serverTime - now
        connectedAt = now
        everConnected = true
        attempts = 0
        if let cred = credential, !cred.isEmpty {
            let action = Self.isJWT(cred) ? "auth" : "gauth"
            send(action: action, body: .object([("cred", .string(cred))]), outstanding: .auth)
        }
        for path in viewOrder { sendListen(path) }
        for registration in onDisconnectRegistrations { sendOnDisconnect(registration) }
        for index in pendingWrites.indices { sendWrite(index: index) }
        for index in pendingGets.indices { sendGet(index: index) }
        deliver(.status(.connected(session: session)))
    }

    /// `auth` for tokens shaped like a JWT, `gauth` otherwise (`owner`, OAuth tokens), as the JS SDK picks.
    static func isJWT(_ token: String) -> Bool {
        token.split(separator: ".", omittingEmptySubsequences: false).count == 3
    }

    mutating func lost(reason: String, now: Int64) {
        outstanding.removeAll()
        probeDeadline = nil
        helloDeadline = nil
        for i in pendingWrites.indices { pendingWrites[i].request = nil }
        for i in pendingGets.indices { pendingGets[i].request = nil }
        for path in viewOrder { views[path]?.complete = false }
        if let since = connectedAt {
            backoff.connectionEnded(lastedMilliseconds: now - since)
            connectedAt = nil
        }
        deliver(.status(.disconnected(reason: reason)))
        if networkDown {
            phase = .waitingForNetwork
            deliver(.status(.waitingForNetwork))
        } else {
            let delay = backoff.nextDelay(unit: random())
            phase = .waitingToReconnect(at: now + delay)
            deliver(.status(.reconnecting(inMilliseconds: delay)))
        }
    }

    mutating func giveUp(_ message: String) {
        switch phase {
        case .connecting, .handshaking, .connected, .stopping: effects.append(.abort)
        default: break
        }
        deliver(.fatal(message))
        finishStop()
    }

    private mutating func finishStop() {
        phase = .stopped
        outstanding.removeAll()
        deliver(.status(.stopped))
    }

}
