/// The node-side lease rules, on the node's monotonic clock (pure; the shell drives it):
///
/// - **Fencing.** The node counts from when each successful beat was *sent*. Redis received it no
///   earlier, so Redis's view of the lease (`beat + lease`, in Redis time) always ends after the
///   node's `sent + fenceAfter` as long as `fenceAfter < lease`: the node stops acknowledging
///   writes and closes its clients before any other node can consider it dead.
/// - **Reaping guard.** After (re)connecting, a node reaps only once it has been connected for
///   `lease + 1 s`: other nodes get a full lease to beat again after a Redis restart, so the
///   first node back does not declare all the others dead.
public struct LeaseMonitor: Sendable, Equatable {
    public let leaseMilliseconds: Int64
    public let fenceAfterMilliseconds: Int64
    public private(set) var lastGoodBeatSentAt: Int64?
    public private(set) var connectedSince: Int64?

    public enum Invalid: Error, Equatable {
        /// Fencing must happen before the lease can expire, with room for one beat's round trip.
        case fenceNotBeforeLease(fenceAfter: Int64, lease: Int64)
    }

    public init(leaseMilliseconds: Int64, fenceAfterMilliseconds: Int64) throws(Invalid) {
        guard fenceAfterMilliseconds > 0, fenceAfterMilliseconds < leaseMilliseconds else {
            throw .fenceNotBeforeLease(fenceAfter: fenceAfterMilliseconds, lease: leaseMilliseconds)
        }
        self.leaseMilliseconds = leaseMilliseconds
        self.fenceAfterMilliseconds = fenceAfterMilliseconds
    }

    /// A beat sent at `sentAt` was accepted (`BEAT` or `JOIN` answered OK).
    public mutating func beatSucceeded(sentAt: Int64) {
        lastGoodBeatSentAt = max(lastGoodBeatSentAt ?? sentAt, sentAt)
    }

    /// The lease is gone for good (`EXPIRED`, `UNKNOWN`, `EPOCH`): fenced until a new incarnation joins.
    public mutating func leaseLost() { lastGoodBeatSentAt = nil }

    public mutating func connected(at now: Int64) { connectedSince = now }
    public mutating func disconnected() { connectedSince = nil }

    /// Whether the node must not act (acknowledge writes, serve clients) at `now`.
    public func isFenced(at now: Int64) -> Bool {
        guard let sent = lastGoodBeatSentAt else { return true }
        return now - sent >= fenceAfterMilliseconds
    }

    /// When the node fences itself unless a beat succeeds first (nil: already fenced).
    public var fenceDeadline: Int64? { lastGoodBeatSentAt.map { $0 + fenceAfterMilliseconds } }

    public func mayReap(at now: Int64) -> Bool {
        guard let since = connectedSince, !isFenced(at: now) else { return false }
        return now - since >= leaseMilliseconds + 1000
    }
}
