import PresenceLoop

/// Which connections' queued frames are not going out: a queue that has not lost a frame for
/// `stalledAfterMilliseconds` (`--pushback-stall-seconds`) waits for a socket its peer does not read. Push-back on writers
/// (`WriterPushback`) counts only the other queued bytes: pausing writers cannot make a reader
/// that does not read drain, so its bytes would hold every writer paused (issue 16's slow
/// readers); they are bounded by `--max-queued-bytes` per connection instead.
struct StalledQueues {
    let stalledAfterMilliseconds: Int64
    /// Connections with frames queued, and when their queue last moved (began, or lost a frame).
    private var lastMoved: [UInt64: Int64] = [:]
    private var cached: (at: Int64, bytes: Int)?

    init(stalledAfterMilliseconds: Int64) { self.stalledAfterMilliseconds = max(1, stalledAfterMilliseconds) }

    /// The queue of `id` began (`wasEmpty`) or lost a frame and still holds some.
    mutating func moved(_ id: UInt64, now: Int64) { lastMoved[id] = now }

    mutating func emptied(_ id: UInt64) { lastMoved.removeValue(forKey: id) }

    /// Bytes queued for connections that are stalled, worked out at most once a millisecond (it
    /// visits every connection with a queue, and is asked at each write past the threshold).
    mutating func stalledBytes(now: Int64, queuedBytes: (UInt64) -> Int) -> Int {
        if let cached, cached.at == now { return cached.bytes }
        var bytes = 0
        for (id, moved) in lastMoved where now - moved >= stalledAfterMilliseconds { bytes += queuedBytes(id) }
        cached = (now, bytes)
        return bytes
    }
}
