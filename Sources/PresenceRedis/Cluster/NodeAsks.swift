/// Operators' questions to every node, and each node's answer (docs/scaling.md, "Operators"): the
/// cluster-wide `/.admin/connections` and kicks are a scatter-gather through Redis. The node
/// asked appends an ask to `<prefix>:{nodes}:asks` (a stream, capped); every node reads that
/// stream with a blocking `XREAD` on a connection of its own, so it sees an ask within a round
/// trip, and pushes its answer (bounded by the ask) onto `<prefix>:{nodes}:answer:<ask id>` (a
/// list that expires). The node asked reads the answers from that list until it has them all or
/// its wait is over. Nothing is kept per connection in Redis, and nothing runs per beat.
public final class NodeAsks {
    /// The connection that posts asks, answers and reads answers (the node's command connection).
    public let connection: RedisConnection
    /// Dedicated to the blocking read of the asks: a blocked read holds up every other command.
    public let reader: RedisConnection
    public let nodeID: String
    public let asksKey: String
    let answerPrefix: String
    public let blockMilliseconds: Int64
    /// Asks kept in the stream (approximately): a node away longer than it takes to post this
    /// many misses the oldest, which nobody waits for any more.
    public static let keptAsks = 1000
    /// An answer list lives this long: longer than any node asked waits for it.
    public static let answerTTLMilliseconds: Int64 = 30_000
    /// Asks by other nodes, as they arrive (this node's own asks are skipped).
    public var onAsk: ((Ask) -> Void)?
    /// The last ask read (or, at start, the newest ask in the stream: older ones are not for us).
    public private(set) var lastAskID: String?
    private var reading = false
    private var stopped = false

    public struct Ask: Sendable, Equatable {
        /// The stream id (`<redis ms>-<n>`); its answers go to `answerKey(id)`.
        public var id: String
        public var kind: String
        /// The node asked by the operator.
        public var from: String
        public var body: [UInt8]

        /// When it was posted, Redis ms (from its id).
        public var postedAt: Int64? { id.split(separator: "-").first.flatMap { Int64($0) } }
    }

    public init(connection: RedisConnection, reader: RedisConnection, nodeID: String, prefix: String = "presence",
                blockMilliseconds: Int64 = 5000) {
        self.connection = connection
        self.reader = reader
        self.nodeID = nodeID
        asksKey = prefix + ":{nodes}:asks"
        answerPrefix = prefix + ":{nodes}:answer:"
        self.blockMilliseconds = max(1, blockMilliseconds)
    }

    public func answerKey(_ askID: String) -> String { answerPrefix + askID }

    /// Starts reading asks posted from now on (the reader connection must be started too).
    public func start() {
        stopped = false
        guard lastAskID == nil else { return read() }
        reader.send(RedisCommand("XREVRANGE", asksKey, "+", "-", "COUNT", 1)) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let reply):
                lastAskID = reply.array?.first?.array?.first?.string ?? "0-0"
                read()
            case .failure:
                if reader.state != .closed { start() } // waits in the queue for the reconnect
            }
        }
    }

    public func stop() { stopped = true }

    /// Posts an ask to every node; answers its id.
    public func ask(kind: String, body: [UInt8], completion: @escaping (Result<String, RedisError>) -> Void) {
        let command = RedisCommand("XADD", asksKey, "MAXLEN", "~", Self.keptAsks, "*", "k", kind, "n", nodeID, "b", body)
        connection.send(command) { result in
            switch result {
            case .success(let reply):
                if let id = reply.string { completion(.success(id)) } else {
                    completion(.failure(.unexpectedReply("XADD: \(reply.errorMessage ?? String(describing: reply))")))
                }
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// Answers ask `askID` (one transaction: the answer and the list's expiry).
    public func answer(_ askID: String, body: [UInt8], completion: @escaping (Result<Void, RedisError>) -> Void) {
        let key = answerKey(askID)
        connection.sendAll([RedisCommand("MULTI"), RedisCommand("RPUSH", key, body),
                            RedisCommand("PEXPIRE", key, Self.answerTTLMilliseconds), RedisCommand("EXEC")]) { results in
            for result in results {
                switch result {
                case .failure(let error): return completion(.failure(error))
                case .success(let reply):
                    if let message = reply.errorMessage { return completion(.failure(.unexpectedReply(message))) }
                }
            }
            completion(.success(()))
        }
    }

    /// The answers to `askID` from the `skip`-th on, in arrival order.
    public func answers(to askID: String, skip: Int, completion: @escaping (Result<[[UInt8]], RedisError>) -> Void) {
        connection.send(RedisCommand("LRANGE", answerKey(askID), max(0, skip), -1)) { result in
            switch result {
            case .success(let reply):
                if let items = reply.array { completion(.success(items.compactMap(\.bytes))) } else {
                    completion(.failure(.unexpectedReply("LRANGE: \(reply.errorMessage ?? String(describing: reply))")))
                }
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    private func read() {
        guard !reading, !stopped, let lastAskID else { return }
        reading = true
        let command = RedisCommand("XREAD", "COUNT", 100, "BLOCK", blockMilliseconds, "STREAMS", asksKey, lastAskID)
        reader.send(command, timeoutMilliseconds: blockMilliseconds + reader.options.commandTimeoutMilliseconds) { [weak self] result in
            guard let self else { return }
            reading = false
            if case .success(let reply) = result, let asks = Self.parse(reply) {
                if let last = asks.last { self.lastAskID = last.id }
                for ask in asks where ask.from != nodeID { onAsk?(ask) }
            }
            // After a failure the next read waits in the connection's queue for the reconnect.
            if reader.state == .closed { stopped = true } else { read() }
        }
    }

    /// The asks in an XREAD reply (none when the block expired); nil when it is not one.
    static func parse(_ reply: RedisReply) -> [Ask]? {
        if reply.isNull { return [] }
        guard let streams = reply.array else { return nil }
        var asks: [Ask] = []
        for stream in streams {
            guard let pair = stream.array, pair.count == 2, let items = pair[1].array else { return nil }
            for item in items {
                guard let parts = item.array, parts.count == 2, let id = parts[0].string, let fields = parts[1].array else { return nil }
                var values: [String: [UInt8]] = [:]
                var index = 0
                while index + 1 < fields.count {
                    if let name = fields[index].string { values[name] = fields[index + 1].bytes ?? [] }
                    index += 2
                }
                asks.append(Ask(id: id, kind: String(decoding: values["k"] ?? [], as: UTF8.self),
                                from: String(decoding: values["n"] ?? [], as: UTF8.self), body: values["b"] ?? []))
            }
        }
        return asks
    }
}
