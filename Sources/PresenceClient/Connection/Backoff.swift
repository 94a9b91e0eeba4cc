/// Reconnect delays as the SDKs choose them (protocol doc §2.5): the ceiling starts at 1 s and
/// grows ×1.3 per attempt up to 30 s; each wait is a uniformly random value below the ceiling
/// ("full jitter"); the ceiling goes back to 1 s once a connection has lasted 30 s.
public struct Backoff: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        public var initialMilliseconds: Int64 = 1000
        public var multiplier: Double = 1.3
        public var maxMilliseconds: Int64 = 30_000
        /// A connection that lasted this long resets the ceiling.
        public var resetAfterMilliseconds: Int64 = 30_000

        public init() {}
    }

    public let policy: Policy
    /// The current ceiling (the next wait is random below it).
    public private(set) var ceilingMilliseconds: Int64

    public init(policy: Policy = Policy()) {
        self.policy = policy
        ceilingMilliseconds = policy.initialMilliseconds
    }

    /// The wait before the next attempt, given `unit` in [0, 1) from the random source; grows the ceiling.
    public mutating func nextDelay(unit: Double) -> Int64 {
        let u = min(max(unit, 0), 1)
        let delay = Int64((Double(ceilingMilliseconds) * u).rounded(.down))
        let grown = Int64((Double(ceilingMilliseconds) * policy.multiplier).rounded(.up))
        ceilingMilliseconds = min(grown, policy.maxMilliseconds)
        return min(delay, policy.maxMilliseconds)
    }

    /// Called when a connection ends: resets the ceiling if it lasted long enough.
    public mutating func connectionEnded(lastedMilliseconds: Int64) {
        if lastedMilliseconds >= policy.resetAfterMilliseconds { reset() }
    }

    public mutating func reset() { ceilingMilliseconds = policy.initialMilliseconds }
}
