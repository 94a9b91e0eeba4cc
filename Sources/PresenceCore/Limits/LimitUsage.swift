/// One user's use of one limit: what is stored durably.
///
/// The rules, with one clock (the server's) and no tolerance windows:
/// - each permitted use adds 1 to `count`; the use that makes `count` reach the tier's limit starts
///   the cooldown at that moment;
/// - the cooldown ends exactly `cooldown` after it started: `count` is then 0 again;
/// - a use during the cooldown is refused and changes nothing.
/// The tier's numbers are read at each check, so a changed limits file applies from the next one.
public struct LimitUsage: Sendable, Equatable {
    public var count: Int
    /// When the cooldown started (ms, server clock); nil when none runs.
    public var cooldownStartedAt: Int64?

    public init(count: Int = 0, cooldownStartedAt: Int64? = nil) {
        self.count = count
        self.cooldownStartedAt = cooldownStartedAt
    }

    public static let unused = LimitUsage()

    /// What changed while bringing the usage up to `now` under a tier's numbers.
    public enum Transition: Sendable, Equatable {
        /// The cooldown that started at `startedAt` ended at `endedAt` (≤ now): the count is 0.
        case cooldownCompleted(startedAt: Int64, endedAt: Int64)
        /// The count is at or above the limit with no cooldown running (the limit was lowered, or a
        /// cooldown was added to the tier): the cooldown starts now.
        case cooldownStarted(at: Int64)
        /// The count is below the limit again (the limit was raised): the cooldown is dropped.
        case cooldownCancelled
    }

    /// Brings the usage up to `now` for a tier allowing `uses` per `cooldown` ms. Returns the
    /// transitions in order (at most two: a completed cooldown can be followed by nothing else,
    /// since the count is then 0 and `uses` ≥ 1 whenever there is a cooldown).
    public mutating func advance(to now: Int64, uses: Int, cooldown: Int64?) -> [Transition] {
        var transitions: [Transition] = []
        guard let cooldown else {
            // No cooldown in this tier (any more): the uses never come back.
            if cooldownStartedAt != nil { cooldownStartedAt = nil; transitions.append(.cooldownCancelled) }
            return transitions
        }
        if let started = cooldownStartedAt {
            let ends = Self.end(of: started, cooldown)
            if now >= ends {
                count = 0
                cooldownStartedAt = nil
                transitions.append(.cooldownCompleted(startedAt: started, endedAt: ends))
            } else if count < uses {
                cooldownStartedAt = nil
                transitions.append(.cooldownCancelled)
            }
        } else if count >= uses {
            cooldownStartedAt = now
            transitions.append(.cooldownStarted(at: now))
        }
        return transitions
    }

    /// Counts one permitted use at `now`; returns true when it started the cooldown.
    public mutating func consume(at now: Int64, uses: Int, cooldown: Int64?) -> Bool {
        count += 1
        if count >= uses, cooldown != nil {
            cooldownStartedAt = now
            return true
        }
        return false
    }

    /// ms left in the cooldown at `now` (0 when none runs).
    public func remainingCooldown(at now: Int64, cooldown: Int64?) -> Int64 {
        guard let started = cooldownStartedAt, let cooldown else { return 0 }
        let (left, overflow) = Self.end(of: started, cooldown).subtractingReportingOverflow(now)
        return overflow ? (now < 0 ? .max : 0) : max(0, left)
    }

    /// When a cooldown that started at `started` ends. A start time read back from storage is
    /// not trusted to be sane: the sum saturates instead of trapping.
    static func end(of started: Int64, _ cooldown: Int64) -> Int64 {
        let (sum, overflow) = started.addingReportingOverflow(cooldown)
        return overflow ? (cooldown > 0 ? .max : .min) : sum
    }
}

/// Which stored usage: one user's, of one limit, in one namespace.
public struct LimitUsageKey: Hashable, Sendable, Comparable {
    public var namespace: String
    public var limit: String
    public var uid: String

    public init(namespace: String, limit: String, uid: String) {
        self.namespace = namespace
        self.limit = limit
        self.uid = uid
    }

    public static func < (a: LimitUsageKey, b: LimitUsageKey) -> Bool {
        (a.namespace, a.limit, a.uid) < (b.namespace, b.limit, b.uid)
    }
}
