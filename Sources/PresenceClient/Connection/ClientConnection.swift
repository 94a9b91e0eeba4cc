import PresenceCore

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
    public private(set) var phase: Phase = .idle
    /// The `s` of the last hello (sent back as `ls=`).
    public private(set) var lastSession: String?
    /// `hello.ts - now` at the last hello.
    public private(set) var serverTimeOffset: Int64 = 0
    public private(set) var backoff: Backoff
    /// True while the app has turned the network off (``networkOff(now:)``).
    public private(set) var networkDown = false
    public private(set) var attempts = 0
    public var credential: String?

    private var random: () -> Double
    private var effects: [ClientEffect] = []
    private var nextRequest = 1
    private var nextID = 1
    private var outstanding: [Int: Outstanding] = [:]
    private var everConnected = false
    private var connectedAt: Int64?
    private var lastActivity: Int64 = 0
    private var probeDeadline: Int64?
    private var helloDeadline: Int64?

    private enum Outstanding {
        case auth, listen(Path), unlisten, write(WriteID), onDisconnect(OnDisconnectID), get(GetID)
    }

    private struct View {
        var listeners: [ListenerID]
        var value: JSON = .null
        var hasValue = false
        var complete = false
    }
    private var views: [Path: View] = [:]
    private var viewOrder: [Path] = []
    private var listenerPaths: [ListenerID: Path] = [:]

    /// A write kept until acknowledged.
    public struct PendingWrite: Equatable, Sendable {
        public enum Action: String, Sendable { case set = "p", update = "m" }
        public var id: WriteID
        public var action: Action
        public var path: Path
        public var data: JSON
        /// The request number on the current connection, nil when not sent on it yet.
        public var request: Int?
    }
    public private(set) var pendingWrites: [PendingWrite] = []

    /// An onDisconnect registration kept for re-registration after a reconnect.
    public struct OnDisconnectOp: Equatable, Sendable {
        public enum Action: String, Sendable { case set = "o", update = "om", cancel = "oc" }
        public var id: OnDisconnectID
        public var action: Action
        public var path: Path
        public var data: JSON
    }
    public private(set) var onDisconnectOps: [OnDisconnectOp] = []

    private var pendingGets: [(id: GetID, path: Path, request: Int?)] = []

    /// - Parameter random: a uniform source in [0, 1) for the backoff jitter.
    public init(configuration: ClientConfiguration, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.configuration = configuration
        self.credential = configuration.credential
        self.random = random
        self.backoff = Backoff(policy: configuration.backoff)
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

    /// The transport ended.
    public mutating func transportClosed(reason: String, now: Int64) {
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

    /// One whole text message from the transport (frame counts already joined by the shell).
    public mutating func received(_ text: String, now: Int64) {
        guard phase == .handshaking || phase == .connected || phase == .stopping else { return }
        lastActivity = now
        probeDeadline = nil
        guard let message = ClientCodec.decode(text) else {
            deliver(.serverMessage("undecodable message from the server: \(text.prefix(200))"))
            return
        }
        switch message {
        case .hello(let ts, _, _, let session):
            guard phase == .handshaking else { return }
            hello(session: session, serverTime: ts, now: now)
        case .pong:
            break
        case .shutdown(let reason):
            giveUp("the server shut this client down: \(reason)")
        case .reset:
            // Only one host here: treat as a loss and reconnect through the backoff.
            if phase == .connected || phase == .handshaking {
                effects.append(.abort)
                lost(reason: "server asked to reconnect", now: now)
            }
        case .error(let text):
            deliver(.serverMessage("server error: \(text)"))
        case .reply(let request, let status, let data):
            reply(request, status: status, data: data, now: now)
        case .push(let action, let body):
            push(action, body: body, now: now)
        }
    }

    /// Call at ``nextDeadline`` (calling early or often is harmless).
    public mutating func timerFired(now: Int64) {
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

    // MARK: app requests

    /// Starts listening at `path`. Listeners on the same path share one server listen; the first
    /// value is delivered as soon as known. Works offline (sent after the next hello).
    public mutating func listen(_ path: Path, now: Int64) -> ListenerID {
        let id = takeID()
        listenerPaths[id] = path
        if var view = views[path] {
            view.listeners.append(id)
            views[path] = view
            if view.hasValue { deliver(.value(listener: id, path: path, value: view.value)) }
        } else {
            views[path] = View(listeners: [id])
            viewOrder.append(path)
            if phase == .connected { sendListen(path) }
        }
        return id
    }

    /// Stops a listener; the server listen ends with the last listener of its path.
    public mutating func unlisten(_ id: ListenerID, now: Int64) {
        guard let path = listenerPaths.removeValue(forKey: id), var view = views[path] else { return }
        view.listeners.removeAll { $0 == id }
        if view.listeners.isEmpty {
            views[path] = nil
            viewOrder.removeAll { $0 == path }
            if phase == .connected { send(action: "n", body: .object([("p", .string(path.description))]), outstanding: .unlisten) }
        } else {
            views[path] = view
        }
    }

    /// `set`: overwrites the value at `path` (`null` deletes). Server values such as
    /// `{".sv":"timestamp"}` may appear anywhere in `value`.
    public mutating func set(_ path: Path, _ value: JSON, now: Int64) -> WriteID {
        write(.set, path, value)
    }

    /// `update`: each key (a relative path) replaces the value below `path`.
    public mutating func update(_ path: Path, _ children: [(String, JSON)], now: Int64) -> WriteID {
        write(.update, path, .object(children))
    }

    /// `remove`: deletes the value at `path`.
    public mutating func remove(_ path: Path, now: Int64) -> WriteID {
        write(.set, path, .null)
    }

    /// `onDisconnect().set(value)` at `path`; kept and re-registered after every reconnect.
    public mutating func onDisconnectSet(_ path: Path, _ value: JSON, now: Int64) -> OnDisconnectID {
        onDisconnectOps.removeAll { path.contains($0.path) }
        return registerOnDisconnect(.set, path, value)
    }

    /// `onDisconnect().update(children)` at `path`.
    public mutating func onDisconnectUpdate(_ path: Path, _ children: [(String, JSON)], now: Int64) -> OnDisconnectID {
        registerOnDisconnect(.update, path, .object(children))
    }

    /// `onDisconnect().cancel()` at `path`: forgets the registrations at and below it.
    public mutating func onDisconnectCancel(_ path: Path, now: Int64) -> OnDisconnectID {
        onDisconnectOps.removeAll { path.contains($0.path) }
        // Only a registration above `path` still has a part to cancel on a new session.
        let keep = onDisconnectOps.contains { $0.path.contains(path) }
        let id = takeID()
        let op = OnDisconnectOp(id: id, action: .cancel, path: path, data: .null)
        if keep { onDisconnectOps.append(op) }
        if phase == .connected { sendOnDisconnect(op) }
        return id
    }

    /// A one-shot read of `path`.
    public mutating func get(_ path: Path, now: Int64) -> GetID {
        let id = takeID()
        pendingGets.append((id, path, nil))
        if phase == .connected { sendGet(index: pendingGets.count - 1) }
        return id
    }

    // MARK: internals

    private mutating func takeID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    private mutating func deliver(_ event: ClientEvent) { effects.append(.deliver(event)) }

    @discardableResult
    private mutating func send(action: String, body: JSON, outstanding kind: Outstanding) -> Int {
        let r = nextRequest
        nextRequest += 1
        outstanding[r] = kind
        effects.append(.send(ClientCodec.request(r, action: action, body: body)))
        return r
    }

    private mutating func connect(now: Int64) {
        attempts += 1
        phase = .connecting
        probeDeadline = nil
        helloDeadline = nil
        deliver(.status(.connecting(attempt: attempts)))
        effects.append(.open(configuration.url(lastSession: lastSession)))
    }

    private mutating func hello(session: String, serverTime: Int64, now: Int64) {
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
        for op in onDisconnectOps { sendOnDisconnect(op) }
        for index in pendingWrites.indices { sendWrite(index: index) }
        for index in pendingGets.indices { sendGet(index: index) }
        deliver(.status(.connected(session: session)))
    }

    /// `auth` for tokens shaped like a JWT, `gauth` otherwise (`owner`, OAuth tokens), as the JS SDK picks.
    static func isJWT(_ token: String) -> Bool {
        token.split(separator: ".", omittingEmptySubsequences: false).count == 3
    }

    private mutating func sendListen(_ path: Path) {
        send(action: "q", body: .object([("p", .string(path.description)), ("h", "")]), outstanding: .listen(path))
    }

    private mutating func sendOnDisconnect(_ op: OnDisconnectOp) {
        send(action: op.action.rawValue, body: .object([("p", .string(op.path.description)), ("d", op.data)]),
             outstanding: .onDisconnect(op.id))
    }

    private mutating func sendWrite(index: Int) {
        let w = pendingWrites[index]
        let r = send(action: w.action.rawValue, body: .object([("p", .string(w.path.description)), ("d", w.data)]),
                     outstanding: .write(w.id))
        pendingWrites[index].request = r
        deliver(.writeSent(w.id, request: r))
    }

    private mutating func sendGet(index: Int) {
        let g = pendingGets[index]
        let r = send(action: "g", body: .object([("p", .string(g.path.description)), ("q", .object([]))]),
                     outstanding: .get(g.id))
        pendingGets[index].request = r
    }

    private mutating func write(_ action: PendingWrite.Action, _ path: Path, _ data: JSON) -> WriteID {
        let id = takeID()
        pendingWrites.append(PendingWrite(id: id, action: action, path: path, data: data, request: nil))
        if phase == .connected { sendWrite(index: pendingWrites.count - 1) }
        return id
    }

    private mutating func registerOnDisconnect(_ action: OnDisconnectOp.Action, _ path: Path, _ data: JSON) -> OnDisconnectID {
        let id = takeID()
        let op = OnDisconnectOp(id: id, action: action, path: path, data: data)
        onDisconnectOps.append(op)
        if phase == .connected { sendOnDisconnect(op) }
        return id
    }

    private mutating func lost(reason: String, now: Int64) {
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

    private mutating func giveUp(_ message: String) {
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

    private mutating func reply(_ request: Int, status: String, data: JSON, now: Int64) {
        guard let kind = outstanding.removeValue(forKey: request) else { return }
        let failure: RequestFailure? = status == "ok" ? nil : RequestFailure(status: status, message: data.stringValue ?? JSONWriter.string(data))
        switch kind {
        case .auth:
            if let failure {
                deliver(.authFailed(failure))
                if configuration.stopOnAuthFailure {
                    deliver(.fatal("the server refused the credential: \(failure)"))
                    outstanding.removeAll()  // what follows was processed without the credential
                    phase = .stopping
                    effects.append(.close)
                }
            } else {
                deliver(.authenticated(data))
            }
        case .listen(let path):
            guard var view = views[path] else { return }
            if let failure {
                views[path] = nil
                viewOrder.removeAll { $0 == path }
                for id in view.listeners {
                    listenerPaths[id] = nil
                    deliver(.listenFailed(listener: id, path: path, failure))
                }
            } else {
                view.complete = true
                let first = !view.hasValue
                view.hasValue = true
                views[path] = view
                if first { for id in view.listeners { deliver(.value(listener: id, path: path, value: view.value)) } }
            }
        case .unlisten:
            break
        case .write(let id):
            pendingWrites.removeAll { $0.id == id }
            deliver(.writeCompleted(id, failure))
        case .onDisconnect(let id):
            if failure != nil { onDisconnectOps.removeAll { $0.id == id } }
            deliver(.onDisconnectCompleted(id, failure))
        case .get(let id):
            pendingGets.removeAll { $0.id == id }
            deliver(.getCompleted(id, failure == nil ? data : nil, failure))
        }
    }

    private mutating func push(_ action: String, body: JSON, now: Int64) {
        switch action {
        case "d", "m":
            guard body["t"] == nil || body["t"] == .null else { return }  // tagged queries: not used here
            let at = JSONTree.pathSegments(body["p"]?.stringValue ?? "")
            let data = body["d"] ?? .null
            var pieces: [([String], JSON)] = []
            if action == "d" {
                pieces = [(at, data)]
            } else {
                for (key, value) in data.objectMembers ?? [] { pieces.append((at + JSONTree.segments(key), value)) }
            }
            apply(pieces)
        case "c":
            let path = Path(validated: JSONTree.pathSegments(body["p"]?.stringValue ?? ""))
            guard let view = views.removeValue(forKey: path) else { return }
            viewOrder.removeAll { $0 == path }
            let failure = RequestFailure(status: "permission_denied", message: "listen revoked by the server")
            for id in view.listeners {
                listenerPaths[id] = nil
                deliver(.listenFailed(listener: id, path: path, failure))
            }
        case "ac":
            let failure = RequestFailure(status: body["s"]?.stringValue ?? "revoked", message: body["d"]?.stringValue ?? "")
            deliver(.authRevoked(failure))
            if configuration.stopOnAuthFailure {
                deliver(.fatal("the server revoked the credential: \(failure)"))
                phase = .stopping
                effects.append(.close)
            } else {
                effects.append(.abort)
                lost(reason: "credential revoked", now: now)
            }
        case "sd":
            deliver(.serverMessage("FIREBASE: " + (body["msg"]?.stringValue ?? "")))
        default:
            break
        }
    }

    /// Applies overwrites (absolute segments, value) to every view they touch; one event per changed view.
    private mutating func apply(_ pieces: [([String], JSON)]) {
        for path in viewOrder {
            guard var view = views[path] else { continue }
            let listen = path.segments
            var value = view.value
            var touched = false
            for (at, data) in pieces {
                if at.count >= listen.count, Array(at.prefix(listen.count)) == listen {
                    value = JSONTree.setting(data, at: at[listen.count...], in: value)
                    touched = true
                } else if at.count < listen.count, Array(listen.prefix(at.count)) == at {
                    value = JSONTree.normalized(JSONTree.value(at: listen[at.count...], in: data))
                    touched = true
                }
            }
            guard touched else { continue }
            let changed = !view.hasValue || value != view.value
            view.value = value
            view.hasValue = true
            views[path] = view
            if changed { for id in view.listeners { deliver(.value(listener: id, path: path, value: value)) } }
        }
    }
}
