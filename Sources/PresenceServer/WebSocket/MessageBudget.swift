/// One connection's budget of inbound messages (`--max-messages-per-second`, `--message-burst`):
/// a token bucket that refills at `perSecond` up to `burst`. A message costs one token plus one
/// per 16 KiB (so large messages cannot bypass it), plus one per 100 µs the loop spent handling it
/// (so cheap messages that make the server work hard, a read of a big subtree or a write that
/// moves thousands of queries, cannot take the loop from everyone else: at the default 1,000 a
/// second, one connection gets at most about a tenth of the loop). One costly message can take the
/// bucket below zero; it then refills from there. When a message leaves the bucket empty, the
/// shell stops reading from the connection (lws rx flow control) until `resumeAt`: the client is
/// slowed by TCP backpressure, never disconnected, and what it sent is handled in order later.
/// Pure: the shell passes the time.
struct MessageBudget {
    static let bytesPerToken = 16_384

    private var tokens: Double
    private var refilledAt: Int64
    // Kept in 32 bits (the flags are far below): every connection holds a budget.
    private let perSecondLimit: Int32
    private let burstLimit: Int32

    var perSecond: Int { Int(perSecondLimit) }
    var burst: Int { Int(burstLimit) }

    init(perSecond: Int, burst: Int, now: Int64) {
        perSecondLimit = Int32(clamping: max(0, perSecond))
        burstLimit = Int32(clamping: max(1, burst))
        tokens = Double(burstLimit)
        refilledAt = now
    }

    /// Off when `perSecond` is 0.
    var isLimited: Bool { perSecond > 0 }

    static let handlingNanosecondsPerToken: UInt64 = 100_000

    static func cost(bytes: Int, endsMessage: Bool, handlingNanoseconds: UInt64 = 0) -> Double {
        (endsMessage ? 1 : 0) + Double(bytes) / Double(bytesPerToken)
            + Double(handlingNanoseconds) / Double(handlingNanosecondsPerToken)
    }

    /// Spends `cost`; false when the budget is now exhausted (stop reading until `resumeAt`).
    mutating func spend(_ cost: Double, now: Int64) -> Bool {
        guard isLimited else { return true }
        refill(now)
        tokens -= cost
        return tokens > 0
    }

    /// When reading may resume: once a tenth of a second's worth (at least one message) is back,
    /// so a client over its budget is read in steps of ~100 ms, not one message at a time.
    func resumeAt(now: Int64) -> Int64 {
        let wanted = max(1, min(Double(burst), Double(perSecond) / 10))
        let missing = wanted - available(at: now)
        guard missing > 0 else { return now }
        return now + Int64((missing * 1_000 / Double(perSecond)).rounded(.up))
    }

    private func available(at now: Int64) -> Double {
        guard now > refilledAt else { return tokens }
        return min(Double(burst), tokens + Double(now - refilledAt) * Double(perSecond) / 1_000)
    }

    private mutating func refill(_ now: Int64) {
        tokens = available(at: now)
        refilledAt = max(refilledAt, now)
    }
}
