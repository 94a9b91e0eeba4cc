/// Reconnect delays: the ceiling starts at `initial` and doubles per failed attempt up to `max`;
/// each wait is uniformly random in [ceiling/2, ceiling). Half jitter, not full: nodes that lost
/// the same Redis spread their reconnects, yet no wait is ever near zero, so a Redis that refuses
/// connections is never hammered in a tight loop. The ceiling resets once a connection is ready.
public struct RedisBackoff: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        public var initialMilliseconds: Int64
        public var maxMilliseconds: Int64

        public init(initialMilliseconds: Int64 = 100, maxMilliseconds: Int64 = 2000) {
            self.initialMilliseconds = max(1, initialMilliseconds)
            self.maxMilliseconds = max(self.initialMilliseconds, maxMilliseconds)
        }
    }

    public let policy: Policy
    public private(set) var ceilingMilliseconds: Int64

    public init(policy: Policy = Policy()) {
        self.policy = policy
        ceilingMilliseconds = policy.initialMilliseconds
    }

    /// The wait before the next attempt for `unit` in [0, 1) from the random source; grows the ceiling.
    public mutating func nextDelay(unit: Double) -> Int64 {
        let u = unit.isFinite ? min(max(unit, 0), 1) : 0
        let half = ceilingMilliseconds / 2
        let delay = min(half + Int64((Double(ceilingMilliseconds - half) * u).rounded(.down)), ceilingMilliseconds)
        ceilingMilliseconds = min(ceilingMilliseconds * 2, policy.maxMilliseconds)
        return max(delay, 1)
    }

    public mutating func reset() { ceilingMilliseconds = policy.initialMilliseconds }
}
