import PresenceCore

/// The decisions of `presence-client online`, apart from any I/O: when to refresh the list of
/// online users, what a feature-limit status means, and the wording of each outcome.
///
/// The flow: ``start(hasCache:stale:force:)`` says whether the cached list is good enough; if not,
/// the status of the `refreshOnlineUsers` limit is read and ``decide(_:)`` says to refresh or to
/// wait out a cooldown; a refresh refused with `rate_limited` anyway (another device used the last
/// refresh) goes through ``afterRefusal(status:message:)``.
public enum OnlineRefresh {
    /// The scheduler kind whose last success is the time of the last refresh.
    public static let kind: RefreshKind = "online-users"
    /// The server's name of the limit.
    public static let limitName = "refreshOnlineUsers"
    public static let usersPath = Path(validated: ["online-users"])
    public static let statusPath = Path(validated: ["feature-limits", limitName])
    /// The default `--max-age`: 30 minutes.
    public static let defaultMaxAgeSeconds: Int64 = 1800

    /// What to do before talking to the server.
    public enum Start: Equatable, Sendable {
        /// The cached list is fresh: show it, do not connect.
        case showCache
        /// Read the limit status, then refresh.
        case refresh
    }

    /// A cache that exists and is not stale is shown, unless a refresh is forced.
    public static func start(hasCache: Bool, stale: Bool, force: Bool) -> Start {
        hasCache && !stale && !force ? .showCache : .refresh
    }

    /// What to do after reading the limit status.
    public enum Decision: Equatable, Sendable {
        case refresh
        /// Wait `remainingMilliseconds` (out of a cooldown of `totalMilliseconds`) before refreshing.
        case cooldown(remainingMilliseconds: Int64, totalMilliseconds: Int64?)
        /// No wait will help: the uses are spent for good (a tier without cooldown).
        case blocked
    }

    /// Unlimited or uses left: refresh. In a cooldown: wait it out (at least one second, so that a
    /// refusal without a time does not turn into a tight loop). Refused with no cooldown running (no
    /// tier applies, or uses that never come back): refresh anyway and let the server say why.
    public static func decide(_ status: FeatureLimitStatus) -> Decision {
        if status.unlimited || status.canProceed || status.remainingCooldownMilliseconds == 0 { return .refresh }
        return .cooldown(remainingMilliseconds: max(1000, status.remainingCooldownMilliseconds),
                         totalMilliseconds: status.cooldownMilliseconds)
    }

    /// The refresh was refused with `rate_limited` (message `… try again in 1:45`), and `status` is the
    /// status read again afterwards (nil when that failed). A status in cooldown is believed; else
    /// the time in the message; a refusal that names no time and no cooldown is for good.
    public static func afterRefusal(status: FeatureLimitStatus?, message: String) -> Decision {
        if let status, case .cooldown = decide(status) { return decide(status) }
        guard let fromMessage = Countdown.retryAfter(inMessage: message) else {
            return status == nil ? .cooldown(remainingMilliseconds: 1000, totalMilliseconds: nil) : .blocked
        }
        return .cooldown(remainingMilliseconds: max(1000, fromMessage), totalMilliseconds: status?.cooldownMilliseconds)
    }

    /// The uses line shown after a refresh (or with the cached list when the status is known):
    /// `Refreshes: 1 left of 2`, `Refreshes: 0 left of 2 (next in 2:00)`, `Refreshes: unlimited (lite)`,
    /// `Refreshes: unlimited`.
    public static func usesLine(_ status: FeatureLimitStatus) -> String {
        if status.unlimited {
            if let tier = status.tier, !tier.isEmpty { return "Refreshes: unlimited (\(tier))" }
            return "Refreshes: unlimited"
        }
        let left = status.remaining ?? max(0, (status.limit ?? 0) - status.currentUsage)
        var text = "Refreshes: \(left) left"
        if let limit = status.limit { text += " of \(limit)" }
        if status.remainingCooldownMilliseconds > 0 {
            text += " (next in \(Countdown.minutesSeconds(status.remainingCooldownMilliseconds)))"
        }
        return text
    }

    /// The status after one more use, when it cannot be read again: one use fewer; the last use
    /// starts the cooldown.
    public static func afterOneUse(_ status: FeatureLimitStatus) -> FeatureLimitStatus {
        guard !status.unlimited else {
            var s = status
            s.currentUsage += 1
            return s
        }
        var s = status
        s.currentUsage += 1
        let left = max(0, (s.remaining ?? max(0, (s.limit ?? 0) - status.currentUsage)) - 1)
        s.remaining = left
        if left == 0 {
            s.canProceed = false
            s.remainingCooldownMilliseconds = s.cooldownMilliseconds ?? 0
        }
        return s
    }

    /// `3 online (refreshed just now)` or `3 online (cached 12m ago)`.
    public static func header(count: Int, fromCache: Bool, ageMilliseconds: Int64) -> String {
        "\(count) online (" + (fromCache ? "cached \(ageText(ageMilliseconds))" : "refreshed just now") + ")"
    }

    /// `just now` (under a minute), `12m ago`, `3h ago`, `2d ago`.
    public static func ageText(_ milliseconds: Int64) -> String {
        let seconds = max(0, milliseconds) / 1000
        switch seconds {
        case ..<60: return "just now"
        case ..<3600: return "\(seconds / 60)m ago"
        case ..<86_400: return "\(seconds / 3600)h ago"
        default: return "\(seconds / 86_400)d ago"
        }
    }

    /// One user's row: `alice  ● Online  Last seen 5m ago` (uid padded to `width`).
    public static func row(_ record: PresenceRecord, width: Int, formatter: LastSeenFormatter, serverNow: Int64) -> String {
        let marker = record.online == false ? "○ Offline" : "● Online"
        var text = record.uid.padding(to: width) + marker
        if let lastSeen = record.lastSeen {
            text += "  Last seen " + formatter.relative(lastSeen: lastSeen, now: serverNow)
        }
        return text
    }

    /// The column width for the uids of `users`.
    public static func uidWidth(_ users: [PresenceRecord]) -> Int {
        max(8, (users.map(\.uid.count).max() ?? 0) + 2)
    }

    /// The `--json` object of one user.
    public static func userJSON(_ record: PresenceRecord, formatter: LastSeenFormatter, serverNow: Int64) -> JSON {
        .object([
            ("uid", .string(record.uid)),
            ("online", .bool(record.online ?? true)),
            ("lastSeen", record.lastSeen.map { .number(Double($0)) } ?? .null),
            ("status", .string(formatter.status(online: record.online ?? true, lastSeen: record.lastSeen, now: serverNow))),
            ("lastSeenText", record.lastSeen.map { .string(formatter.relative(lastSeen: $0, now: serverNow)) } ?? .null),
        ])
    }

    /// The `--json` form of a status (seconds, as the server sends them).
    public static func statusJSON(_ status: FeatureLimitStatus) -> JSON {
        func number(_ n: Int?) -> JSON { n.map { .number(Double($0)) } ?? .null }
        return .object([
            ("unlimited", .bool(status.unlimited)),
            ("limit", number(status.limit)),
            ("currentUsage", .number(Double(status.currentUsage))),
            ("remaining", number(status.remaining)),
            ("canProceed", .bool(status.canProceed)),
            ("remainingCooldown", .number(Double(status.remainingCooldownMilliseconds) / 1000)),
            ("cooldownSeconds", status.cooldownMilliseconds.map { .number(Double($0) / 1000) } ?? .null),
            ("tier", status.tier.map(JSON.string) ?? .null),
        ])
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
