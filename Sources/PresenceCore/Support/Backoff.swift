/// Reconnect delays: a ceiling that starts at `initial`, grows by `multiplier` per failed attempt
/// up to `max`, and a random wait below it. Two users, two policies:
///
/// - `Policy()` is what the Firebase SDKs do (protocol doc §2.5), for `presence-client`: ×1.3 from
///   1 s to 30 s, full jitter (any wait below the ceiling), the ceiling back to 1 s once a
///   connection has lasted 30 s.
/// - `Policy.redis` is the server's Redis connections: ×2 from 100 ms to 2 s, half jitter (a wait in
///   [ceiling/2, ceiling)), so nodes that lost the same Redis spread their reconnects yet no wait is
///   near zero and a Redis that refuses connections is never hammered. The owner resets it once a
///   connection is ready.
public struct Backoff: Sendable, Equatable {
    public struct Policy: Sendable, Equatable {
        public enum Jitter: Sendable, Equatable {
            /// Uniform in [0, ceiling).
            case full
            /// Uniform in [ceiling/2, ceiling), and at least 1 ms.
            case half
        }

        public var initialMilliseconds: Int64
        public var multiplier: Double
        public var maxMilliseconds: Int64
        /// A connection that lasted this long resets the ceiling (`connectionEnded`).
        public var resetAfterMilliseconds: Int64
        public var jitter: Jitter

        public init(initialMilliseconds: Int64 = 1000, multiplier: Double = 1.3, maxMilliseconds: Int64 = 30_000,
                    resetAfterMilliseconds: Int64 = 30_000, jitter: Jitter = .full) {
            self.initialMilliseconds = max(1, initialMilliseconds)
            self.multiplier = multiplier.isFinite ? max(1, multiplier) : 1
            self.maxMilliseconds = max(self.initialMilliseconds, maxMilliseconds)
            self.resetAfterMilliseconds = resetAfterMilliseconds
            self.jitter = jitter
        }

        /// The server's Redis connections (`RedisConnection`).
        public static func redis(initialMilliseconds: Int64 = 100, maxMilliseconds: Int64 = 2000) -> Policy {
            Policy(initialMilliseconds: initialMilliseconds, multiplier: 2, maxMilliseconds: maxMilliseconds, jitter: .half)
        }
    }

    public let policy: Policy
    /// The current ceiling (the next wait is random below it).
    public private(set) var ceilingMilliseconds: Int64

    public init(policy: Policy = Policy()) {
        self.policy = policy
        ceilingMilliseconds = policy.initialMilliseconds
    }

    /// The wait before the next attempt, given `unit` in [0, 1) from the random source (anything
    /// else is clamped; not finite counts as 0); grows the ceiling.
    public mutating func nextDelay(unit: Double) -> Int64 {
        let u = unit.isFinite ? min(max(unit, 0), 1) : 0
        let ceiling = ceilingMilliseconds
        let grown = Int64((Double(ceiling) * policy.multiplier).rounded(.up))
        ceilingMilliseconds = min(grown, policy.maxMilliseconds)
        switch policy.jitter {
        case .full:
            return min(Int64((Double(ceiling) * u).rounded(.down)), policy.maxMilliseconds)
        case .half:
            let half = ceiling / 2
            return max(min(half + Int64((Double(ceiling - half) * u).rounded(.down)), ceiling), 1)
        }
    }

    /// Called when a connection ends: resets the ceiling if it lasted long enough.
    public mutating func connectionEnded(lastedMilliseconds: Int64) {
        if lastedMilliseconds >= policy.resetAfterMilliseconds { reset() }
    }

    public mutating func reset() { ceilingMilliseconds = policy.initialMilliseconds }
}
