/// Follows namespaces' logs with `XREAD BLOCK` on a connection of its own, and hands their
/// entries over in rev order. After any error (Redis restarted, connection lost, timeout) it
/// reads again from the last rev it delivered, so nothing is lost or repeated; entries that are
/// no longer there (trimmed below a snapshot) are reported as a gap, never skipped silently.
public final class RedisLogTail {
    public enum Event {
        /// New entries of one namespace, consecutive and following the last ones delivered.
        case entries(RedisKeys, [RedisLogEntry])
        /// The next entry in the log is not `expected`: the entries between were trimmed (the node
        /// must load a snapshot). The namespace is no longer followed; `follow` it again after.
        case gap(RedisKeys, expected: UInt64, found: UInt64)
        /// A read failed; the tail retries by itself (after the connection's backoff, or in 1 s
        /// after a reply it does not understand).
        case failed(RedisError)
    }

    public let connection: RedisConnection
    public let blockMilliseconds: Int64
    public let count: Int
    public var onEvent: ((Event) -> Void)?
    /// Namespace -> last rev delivered.
    public private(set) var following: [RedisKeys: UInt64] = [:]
    private var reading = false
    private var stopped = false
    private var retry: RedisTimer?

    /// `connection` must be dedicated to the tail: a blocked read holds up every other command on it.
    public init(connection: RedisConnection, blockMilliseconds: Int64 = 1000, count: Int = 1000) {
        self.connection = connection
        self.blockMilliseconds = max(1, blockMilliseconds)
        self.count = max(1, count)
    }

    /// Follows `keys`' log from the entry after `rev`. Takes effect with the next read (at most
    /// `blockMilliseconds` later when a read is blocked).
    public func follow(_ keys: RedisKeys, after rev: UInt64) {
        following[keys] = rev
        readIfIdle()
    }

    public func unfollow(_ keys: RedisKeys) { following[keys] = nil }

    /// Stops reading (the connection stays open; close it separately).
    public func stop() {
        stopped = true
        retry?.close()
        retry = nil
    }

    deinit { retry?.close() }

    private func readIfIdle() {
        guard !reading, !stopped, !following.isEmpty else { return }
        reading = true
        let streams = following.sorted { $0.key.namespace < $1.key.namespace }
        var arguments: [any RedisArgument] = ["COUNT", count, "BLOCK", blockMilliseconds, "STREAMS"]
        arguments += streams.map(\.key.log)
        arguments += streams.map { "\($0.value)-0" }
        let asked = Dictionary(uniqueKeysWithValues: streams.map { ($0.key.log, $0.key) })
        connection.send(RedisCommand("XREAD", arguments),
                        timeoutMilliseconds: blockMilliseconds + connection.options.commandTimeoutMilliseconds) { result in
            self.reading = false
            switch result {
            case .success(let reply):
                if self.deliver(reply, asked: asked) {
                    self.readIfIdle()
                } else {
                    self.onEvent?(.failed(.unexpectedReply("XREAD: \(reply)")))
                    self.retryLater()
                }
            case .failure(let error):
                self.onEvent?(.failed(error))
                // Not connected: the next read waits in the connection's queue for the reconnect.
                if self.connection.state == .closed { self.stop() } else { self.readIfIdle() }
            }
        }
    }

    /// Delivers a reply's entries per stream; false when the reply is not an XREAD reply.
    private func deliver(_ reply: RedisReply, asked: [String: RedisKeys]) -> Bool {
        if reply.isNull { return true } // the block expired with nothing new
        guard let streams = reply.array else { return false }
        for stream in streams {
            guard let pair = stream.array, pair.count == 2, let name = pair[0].string, let keys = asked[name],
                  let items = pair[1].array else { return false }
            guard var last = following[keys] else { continue } // unfollowed meanwhile
            var entries: [RedisLogEntry] = []
            entries.reserveCapacity(items.count)
            for item in items {
                guard let entry = RedisLogEntry(item) else { return false }
                if entry.rev <= last { continue } // read before a `follow` moved past it
                guard entry.rev == last &+ 1 else {
                    if !entries.isEmpty { following[keys] = last; onEvent?(.entries(keys, entries)) }
                    following[keys] = nil
                    onEvent?(.gap(keys, expected: last &+ 1, found: entry.rev))
                    entries = []
                    break
                }
                entries.append(entry)
                last = entry.rev
            }
            if !entries.isEmpty {
                following[keys] = last
                onEvent?(.entries(keys, entries))
            }
        }
        return true
    }

    private func retryLater() {
        guard !stopped else { return }
        if retry == nil { retry = RedisTimer.make(loop: connection.loop) { [weak self] in self?.readIfIdle() } }
        retry?.arm(afterMilliseconds: 1000)
    }
}
