/// A user's standing on one limit, as the app needs it to draw its button and popup (the seed
/// app's `FeatureLimitResult`), computed without using the limit.
public struct FeatureLimitResult: Sendable, Equatable {
    public var limitName: String
    public var location: Path
    /// The tier that applies, or nil when none does (the operation is then refused).
    public var tier: String?
    public var unlimited: Bool
    /// Would a use now be permitted?
    public var canProceed: Bool
    /// Should the app show its popup ("2 left", "Time remaining 1:45")? True on limited tiers.
    public var showPopup: Bool
    /// ms until the cooldown ends (0 when none runs).
    public var remainingCooldownMilliseconds: Int64
    public var currentUsage: Int
    /// Uses per cooldown; nil when unlimited or no tier applies.
    public var limit: Int?
    public var cooldownMilliseconds: Int64?

    public var remaining: Int? { limit.map { max(0, $0 - currentUsage) } }

    /// `{"limit":2,"currentUsage":1,"remaining":1,"canProceed":true,"showPopup":true,
    /// "remainingCooldown":0,"cooldownSeconds":120,"tier":"free","unlimited":false,"location":"online-users"}`;
    /// `remainingCooldown` and `cooldownSeconds` are seconds with millisecond precision.
    public var json: JSON {
        func seconds(_ ms: Int64) -> JSON { .number(Double(ms) / 1000) }
        return .object([
            ("limit", limit.map { .number(Double($0)) } ?? .null),
            ("currentUsage", .number(Double(currentUsage))),
            ("remaining", remaining.map { .number(Double($0)) } ?? .null),
            ("canProceed", .bool(canProceed)),
            ("showPopup", .bool(showPopup)),
            ("remainingCooldown", seconds(remainingCooldownMilliseconds)),
            ("cooldownSeconds", cooldownMilliseconds.map(seconds) ?? .null),
            ("tier", tier.map(JSON.string) ?? .null),
            ("unlimited", .bool(unlimited)),
            ("location", .string(location.wireString)),
        ])
    }

    /// `1:45` for 105 s (whole seconds, rounded up: the app must not offer a use too early).
    public static func clock(milliseconds: Int64) -> String {
        let whole = max(0, milliseconds)
        let seconds = whole / 1000 + (whole % 1000 > 0 ? 1 : 0)  // no `+ 999`: it overflows at Int64.max
        let rest = seconds % 60
        return "\(seconds / 60):\(rest < 10 ? "0" : "")\(rest)"
    }
}

/// One check of a limit, for metrics and the analytics event log (the seed app's events).
public struct LimitEvent: Sendable, Equatable {
    public enum Outcome: String, Sendable, CaseIterable {
        /// A use on a limited tier, permitted and counted.
        case performed
        /// A use on an unlimited tier: permitted, not counted.
        case bypassByTier = "bypass_by_tier"
        /// Refused: the uses are spent and never come back (a tier without cooldown).
        case blockedByLimit = "blocked_by_limit"
        /// Refused during the cooldown.
        case blockedByCooldown = "blocked_by_cooldown"
        /// Refused: no tier applies to this user.
        case blockedNoTier = "blocked_no_tier"
        /// The limit was reached: the cooldown started.
        case cooldownStarted = "cooldown_started"
        /// A cooldown ended; the count is 0 again. Stamped with the moment it ended.
        case cooldownCompleted = "cooldown_completed"
        /// The status was read (no use).
        case checked
        /// An operator reset the user's usage (`DELETE /.admin/users/{uid}/limits/{limit}`).
        case resetByOperator = "reset_by_operator"
    }

    /// When it happened (ms, server clock).
    public var at: Int64
    public var namespace: String
    public var limit: String
    /// The tier that applied, or nil.
    public var tier: String?
    public var uid: String?
    public var outcome: Outcome
    /// The count after the event.
    public var currentUsage: Int
    public var remainingCooldownMilliseconds: Int64

    /// One line of the JSON-lines event log.
    public var json: JSON {
        .object([
            ("t", .number(Double(at))), ("event", .string(outcome.rawValue)), ("limit", .string(limit)),
            ("tier", tier.map(JSON.string) ?? .null), ("uid", uid.map(JSON.string) ?? .null),
            ("ns", .string(namespace)), ("currentUsage", .number(Double(currentUsage))),
            ("remainingCooldown", .number(Double(remainingCooldownMilliseconds) / 1000)),
        ])
    }
}
