/// Tells a live view when to fall back to polling: after `threshold` consecutive connection
/// attempts that failed (ended without a connection, or with one that lasted less than `stable`),
/// until a connection has stayed up for `stable`. Pure: fed with connection states and `now`.
public struct ConnectionHealth: Equatable, Sendable {
    public var threshold: Int
    public var stableMilliseconds: Int64
    /// Consecutive failed attempts so far.
    public private(set) var failures = 0
    private var connectedAt: Int64?

    public init(threshold: Int = 3, stableMilliseconds: Int64 = 30_000) {
        self.threshold = max(1, threshold)
        self.stableMilliseconds = stableMilliseconds
    }

    /// True while live updates are not to be trusted and the view should poll.
    public var polling: Bool { failures >= threshold }

    /// A connection came up.
    public mutating func connected(now: Int64) { connectedAt = now }

    /// The connection (or the attempt) ended.
    public mutating func disconnected(now: Int64) {
        if let since = connectedAt, now - since >= stableMilliseconds {
            failures = 0
        } else {
            failures += 1
        }
        connectedAt = nil
    }

    /// Time passes: a connection up for `stable` ends the failure streak.
    public mutating func tick(now: Int64) {
        if let since = connectedAt, now - since >= stableMilliseconds { failures = 0 }
    }
}
