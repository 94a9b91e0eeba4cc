import PresenceCore
import PresenceWire

/// Drives an `Engine` the way the lws shell does, without sockets: text frames in, encoded
/// messages out per connection, time from a `ManualClock`, deterministic session ids.
/// The same scenarios run live against the real server in `Tests/live`.
public final class EngineHarness {
    public let engine: Engine
    public let clock: ManualClock
    private var outboxes: [ConnectionID: [String]] = [:]
    private var closes: [ConnectionID: (code: CloseCode, reason: String)] = [:]
    private var nextID: UInt64 = 1
    private var nextSession = 1

    /// `hashDigest`: the digest of transaction hashes and ETags (the server uses SHA-1); nil
    /// answers transactions `not_supported`.
    public init(policy: any AccessPolicy = OpenAccessPolicy(), clock: ManualClock = ManualClock(), graceMilliseconds: Int64 = 0,
                hashDigest: (@Sendable ([UInt8]) -> [UInt8])? = nil, limits: EngineLimits = .default) {
        self.clock = clock
        var counter = 0
        let configuration = Engine.Configuration(disconnectGraceMilliseconds: graceMilliseconds, hashDigest: hashDigest,
                                                 limits: limits)
        self.engine = Engine(configuration: configuration, policy: policy, makeSessionID: {
            counter += 1
            return "session\(counter)"
        })
    }

    /// Opens a connection and returns its id; the hello is in its outbox.
    @discardableResult
    public func connect(namespace: String? = "test", lastSession: String? = nil, host: String = "localhost:9000") -> ConnectionID {
        let id = ConnectionID(nextID)
        nextID += 1
        engine.open(id, namespace: namespace, lastSession: lastSession, host: host, now: clock.now)
        collect()
        return id
    }

    /// Feeds one client text frame, as the shell would after reassembly.
    public func send(_ text: String, from id: ConnectionID) {
        switch try? RequestDecoder.decode(Array(text.utf8)) {
        case .ping?: engine.ping(id)
        case .request(let request)?: engine.handle(request, from: id, now: clock.now)
        case let .invalidRequest(number, _, error)?:
            // As the shell does: an error reply by number, else a control error message.
            let message: Outbound = number.map { .reply(number: $0, result: .failure(error)) }
                ?? .serverError(WireStatus.failure(for: error).message)
            outboxes[id, default: []].append(OutboundEncoder.encode(message))
        case .ignoredControl?, nil: break
        }
        collect()
    }

    /// Sends `{"t":"d","d":{"r":r,"a":action,"b":body}}` with `body` given as JSON text.
    public func request(_ r: Int, _ action: String, _ body: String, from id: ConnectionID) {
        send("{\"t\":\"d\",\"d\":{\"r\":\(r),\"a\":\"\(action)\",\"b\":\(body)}}", from: id)
    }

    public func disconnect(_ id: ConnectionID) {
        engine.disconnect(id, now: clock.now)
        collect()
    }

    /// Moves the clock and fires the engine's timer if it is due, as the shell's one timer does.
    public func advance(byMilliseconds delta: Int64) {
        clock.advance(byMilliseconds: delta)
        if let deadline = engine.nextDeadline, deadline <= clock.now {
            engine.tick(now: clock.now)
            collect()
        }
    }

    /// Everything sent to `id` since the last call, as wire text.
    public func take(_ id: ConnectionID) -> [String] {
        defer { outboxes[id] = [] }
        return outboxes[id] ?? []
    }

    /// The close the engine asked for on `id`, if any.
    public func closeRequest(_ id: ConnectionID) -> (code: CloseCode, reason: String)? { closes[id] }

    public var sessionIDs: [ConnectionID: String] = [:]

    /// An unsigned token (emulator auth) for `uid` with extra claims, e.g. `["subscription": "lite"]`.
    public static func unsignedToken(_ uid: String, claims: [(String, JSON)] = []) -> String {
        func part(_ json: JSON) -> String { Base64URL.encode(Array(JSONWriter.string(json).utf8)) }
        return part(.object([("alg", "none")])) + "." + part(.object([("sub", .string(uid))] + claims)) + "."
    }

    /// Authenticates `id` as `uid` (unsigned token) and drops the reply.
    public func signIn(_ id: ConnectionID, as uid: String, claims: [(String, JSON)] = []) {
        request(0, "auth", "{\"cred\":\"\(Self.unsignedToken(uid, claims: claims))\"}", from: id)
        _ = take(id)
    }

    private func collect() {
        for effect in engine.drainEffects() {
            switch effect {
            case let .send(recipients, message):
                let texts = OutboundEncoder.messages(for: message)
                if case let .hello(_, _, session) = message, let first = recipients.first { sessionIDs[first] = session }
                for id in recipients { outboxes[id, default: []].append(contentsOf: texts) }
            case let .close(id, code, reason):
                closes[id] = (code, reason)
            }
        }
    }
}
