import PresenceCore

/// A one-shot HTTP `GET`. The credential goes in an `Authorization: Bearer` header, not in the URL,
/// so that proxies and access logs do not record it.
public struct HTTPGetRequest: Equatable, Sendable {
    public var url: String
    public var bearer: String?

    public init(url: String, bearer: String? = nil) {
        self.url = url
        self.bearer = bearer
    }
}

/// How an HTTP `GET` ended.
public enum HTTPGetResult: Equatable, Sendable {
    /// The server answered (any status).
    case response(status: Int, body: String)
    /// No answer: connection refused, timed out, TLS or DNS failure.
    case failed(String)
}

/// The HTTP seam of REST polling. Implementations call `completion` exactly once, on any thread;
/// the owner moves the result to its own thread (the client's service thread).
public protocol HTTPGetting: Sendable {
    func get(_ request: HTTPGetRequest, completion: @escaping @Sendable (HTTPGetResult) -> Void)
}

/// The REST side of a server the client reaches over WebSockets: same host and port, `ws` → `http`,
/// `wss` → `https`, the same database and credential.
public struct RESTEndpoint: Equatable, Sendable {
    public var secure: Bool
    public var host: String
    public var port: Int
    public var namespace: String?
    public var credential: String?

    public init(server: WebSocketURL, namespace: String?, credential: String?) {
        secure = server.secure
        host = server.host
        port = server.port
        self.namespace = namespace
        self.credential = credential
    }

    public init(configuration: ClientConfiguration) {
        self.init(server: configuration.server, namespace: configuration.namespace, credential: configuration.credential)
    }

    /// `http://host:port` (or `https://`).
    public var origin: String { "\(secure ? "https" : "http")://\(host):\(port)" }

    /// `GET` address of the value at `path`: `/<segments>.json?ns=<ns>`, each part percent-encoded
    /// (the root is `/.json`). The credential is not in it: see `pollRequest`.
    public func url(for path: Path) -> String {
        var out = origin + "/" + path.segments.map { Self.percentEncoded($0) }.joined(separator: "/") + ".json"
        var query: [String] = []
        if let ns = namespace, !ns.isEmpty { query.append("ns=" + Self.percentEncoded(ns)) }
        if !query.isEmpty { out += "?" + query.joined(separator: "&") }
        return out
    }

    /// The poll of one user's presence (`users/<uid>/presence.json`), or of every user (`users.json`) for nil.
    public func pollURL(uid: String?) -> String { url(for: WatchRefresh.pollPath(uid)) }

    /// The poll request, with the credential as a Bearer token.
    public func pollRequest(uid: String?) -> HTTPGetRequest {
        HTTPGetRequest(url: pollURL(uid: uid), bearer: credential.flatMap { $0.isEmpty ? nil : $0 })
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`), as UTF-8.
    public static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The polling fallback of `watch`, over REST: when the WebSocket keeps failing (``ConnectionHealth``),
/// each watched user (or `users` for `--all`) is read with an HTTP `GET` on the schedule of a
/// ``RefreshScheduler`` (interval with jitter, concurrency limit, retry delay after a failure), until a
/// WebSocket connection has stayed up long enough.
///
/// Pure and single-threaded: fed with connection states, `now` and HTTP results; the owner sends the
/// requests that ``takeDue(now:)`` hands out and reports each result with ``complete(_:_:now:board:)``
/// on the same thread.
public struct WatchPoller {
    public enum Change: Equatable, Sendable { case started, stopped }

    /// A poll to send: report its result under `id`.
    public struct Poll: Equatable, Sendable {
        public let id: Int
        /// The user polled, nil for every user.
        public let uid: String?
        public let request: HTTPGetRequest
    }

    /// What a poll's result changed.
    public struct Completion: Equatable, Sendable {
        /// The rows that changed (empty on failure).
        public var changed: [PresenceRecord] = []
        /// A failure to report: only when it differs from the last one reported for this poll.
        public var note: String?
        /// Give up: the server was never reached, neither over WebSockets nor over HTTP.
        public var fatal: String?
        /// False for a result that no longer belongs to a poll (polling stopped meanwhile).
        public var known = true
    }

    public let endpoint: RESTEndpoint
    /// The users polled; `[nil]` polls every user.
    public let targets: [String?]
    public let policy: RefreshPolicy
    public private(set) var health: ConnectionHealth
    public private(set) var scheduler: RefreshScheduler
    public private(set) var isPolling = false
    /// Poll kind → user (nil: every user).
    private let kindUids: [RefreshKind: String?]
    /// Polls out: ticket id → ticket.
    private var inFlight: [Int: RefreshScheduler.Ticket] = [:]
    /// The failure last reported for each poll (cleared by a success).
    private var reported: [RefreshKind: String] = [:]
    /// The server answered once (a WebSocket connection, or any HTTP response).
    public private(set) var everReached = false

    public init(endpoint: RESTEndpoint, users: [String], all: Bool, policy: RefreshPolicy = WatchRefresh.pollPolicy,
                health: ConnectionHealth = ConnectionHealth(), concurrencyLimit: Int = 4,
                random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.endpoint = endpoint
        targets = all ? [nil] : users.map { Optional($0) }
        var kindUids: [RefreshKind: String?] = [:]
        for uid in targets { kindUids.updateValue(uid, forKey: WatchRefresh.pollKind(uid)) }
        self.kindUids = kindUids
        self.policy = policy
        self.health = health
        scheduler = RefreshScheduler(store: InMemoryRefreshStore(), concurrencyLimit: concurrencyLimit, random: random)
    }

    /// No poll is out.
    public var idle: Bool { inFlight.isEmpty }

    // MARK: connection states

    /// A WebSocket connection came up.
    public mutating func connected(now: Int64) {
        everReached = true
        health.connected(now: now)
    }

    /// The WebSocket connection (or attempt) ended.
    public mutating func disconnected(now: Int64) -> Change? {
        health.disconnected(now: now)
        return update()
    }

    /// Time passes (a connection up long enough ends polling).
    public mutating func tick(now: Int64) -> Change? {
        health.tick(now: now)
        return update()
    }

    private mutating func update() -> Change? {
        guard health.polling != isPolling else { return nil }
        isPolling = health.polling
        if isPolling {
            for uid in targets { scheduler.register(WatchRefresh.pollKind(uid), policy) }
            return .started
        }
        for uid in targets {
            let kind = WatchRefresh.pollKind(uid)
            scheduler.cancel(kind)
            scheduler.unregister(kind)
        }
        inFlight = [:]
        reported = [:]
        return .stopped
    }

    // MARK: polls

    /// The polls due now (none unless polling), under the scheduler's concurrency limit.
    public mutating func takeDue(now: Int64) -> [Poll] {
        guard isPolling else { return [] }
        return scheduler.takeDue(now: now).map { ticket in
            inFlight[ticket.id] = ticket
            let uid = self.uid(of: ticket.kind)
            return Poll(id: ticket.id, uid: uid, request: endpoint.pollRequest(uid: uid))
        }
    }

    /// Reports a poll's result: a `200` with JSON is applied to `board` and moves the poll's timestamp;
    /// anything else is a failure (reported once per change, retried after the policy's delay).
    public mutating func complete(_ id: Int, _ result: HTTPGetResult, now: Int64, board: inout PresenceBoard) -> Completion {
        guard let ticket = inFlight.removeValue(forKey: id) else { return Completion(known: false) }
        let uid = self.uid(of: ticket.kind)
        let what = "poll " + (uid.map { "users/\($0)/presence" } ?? "users")
        var out = Completion()
        let failure: String
        switch result {
        case .response(let status, let body):
            everReached = true
            if status == 200, let value = try? JSONParser.parse(body) {
                scheduler.complete(ticket, success: true, now: now)
                if reported.removeValue(forKey: ticket.kind) != nil { out.note = "\(what): ok" }
                out.changed = uid.map { board.apply(uid: $0, presence: value) } ?? board.apply(users: value)
                return out
            }
            failure = status == 200 ? "the server's answer is not JSON" : Self.describe(status: status, body: body)
        case .failed(let reason):
            if !everReached {
                out.fatal = "cannot connect to \(endpoint.host):\(endpoint.port): \(reason) (is presence-server running there?)"
            }
            failure = "cannot reach \(endpoint.origin): \(reason)"
        }
        scheduler.complete(ticket, success: false, now: now)
        if reported[ticket.kind] != failure {
            reported[ticket.kind] = failure
            out.note = "\(what) failed: \(failure)"
        }
        return out
    }

    /// While polling: `next update in N s`, or `updating` while polls are out; nil when not polling.
    public mutating func statusText(now: Int64) -> String? {
        guard isPolling else { return nil }
        var next: Int64?
        var running = false
        for uid in targets {
            let kind = WatchRefresh.pollKind(uid)
            if scheduler.isRunning(kind) {
                running = true
            } else {
                let t = scheduler.nextRefresh(kind, now: now)
                if next == nil || t < next! { next = t }
            }
        }
        return WatchRefresh.pollText(nextUpdate: next, now: now, running: running)
    }

    // MARK: internals

    private func uid(of kind: RefreshKind) -> String? { kindUids[kind] ?? nil }

    /// `HTTP 401: <the error message the server sent>`.
    static func describe(status: Int, body: String) -> String {
        var text = "HTTP \(status)"
        if let json = try? JSONParser.parse(body), let message = json["error"]?.stringValue, !message.isEmpty {
            text += ": " + message
        } else {
            let trimmed = body.trimmingWhitespace()
            if !trimmed.isEmpty, trimmed.count <= 200 { text += ": " + trimmed }
        }
        return text
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let end = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[start...end])
    }
}
