import PresenceCore

/// A user's standing against one server feature limit, as `g feature-limits/<name>` returns it
/// (the seed app's FeatureLimitResult):
///
///     {"limit": 2, "currentUsage": 1, "remaining": 1, "canProceed": true, "showPopup": true,
///      "remainingCooldown": 0, "cooldownSeconds": 120, "tier": "free", "unlimited": false,
///      "location": "online-users"}
///
/// `null` (no limits configured on the server) reads as unlimited.
public struct FeatureLimitStatus: Equatable, Sendable {
    public var unlimited: Bool
    public var limit: Int?
    public var currentUsage: Int
    public var remaining: Int?
    public var canProceed: Bool
    public var showPopup: Bool
    /// Time left in the cooldown, in ms (the server sends seconds with ms precision).
    public var remainingCooldownMilliseconds: Int64
    /// The whole cooldown, in ms (nil for unlimited tiers).
    public var cooldownMilliseconds: Int64?
    public var tier: String?
    public var location: String?
    /// True when the server has no limit configured at all (the reply was null).
    public var unconfigured: Bool

    public init(unlimited: Bool, limit: Int? = nil, currentUsage: Int = 0, remaining: Int? = nil,
                canProceed: Bool = true, showPopup: Bool = false, remainingCooldownMilliseconds: Int64 = 0,
                cooldownMilliseconds: Int64? = nil, tier: String? = nil, location: String? = nil,
                unconfigured: Bool = false) {
        self.unlimited = unlimited
        self.limit = limit
        self.currentUsage = currentUsage
        self.remaining = remaining
        self.canProceed = canProceed
        self.showPopup = showPopup
        self.remainingCooldownMilliseconds = remainingCooldownMilliseconds
        self.cooldownMilliseconds = cooldownMilliseconds
        self.tier = tier
        self.location = location
        self.unconfigured = unconfigured
    }

    /// No limit configured on the server.
    public static let unconfiguredStatus = FeatureLimitStatus(unlimited: true, unconfigured: true)

    /// Reads a reply; null (or absent) is ``unconfiguredStatus``; anything that is not an object: nil.
    public init?(json: JSON?) {
        guard let json, !json.isNull else { self = .unconfiguredStatus; return }
        guard json.objectMembers != nil else { return nil }
        func int(_ key: String) -> Int? {
            guard let n = json[key]?.numberValue, n.isFinite else { return nil }
            return Int(n.rounded())
        }
        func milliseconds(_ key: String) -> Int64? {
            guard let n = json[key]?.numberValue, n.isFinite else { return nil }
            return Int64((max(0, n) * 1000).rounded())
        }
        let limit = int("limit")
        let unlimited = json["unlimited"]?.boolValue ?? (limit == nil)
        let remainingCooldown = milliseconds("remainingCooldown") ?? 0
        let remaining = int("remaining")
        let canProceed = json["canProceed"]?.boolValue
            ?? (unlimited || (remainingCooldown == 0 && (remaining ?? 1) > 0))
        self.init(unlimited: unlimited, limit: limit, currentUsage: int("currentUsage") ?? 0,
                  remaining: remaining, canProceed: canProceed, showPopup: json["showPopup"]?.boolValue ?? false,
                  remainingCooldownMilliseconds: remainingCooldown,
                  cooldownMilliseconds: milliseconds("cooldownSeconds"),
                  tier: json["tier"]?.stringValue, location: json["location"]?.stringValue)
    }

    /// True while a cooldown runs (the user must wait).
    public var inCooldown: Bool { !unlimited && (!canProceed || remainingCooldownMilliseconds > 0) }
}
