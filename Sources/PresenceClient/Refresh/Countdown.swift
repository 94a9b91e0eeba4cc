import PresenceCore

/// A cooldown being waited out: its end on the local clock and its whole length, for the
/// `Time remaining 1:45` line and its progress bar. Pure: `now` is an input.
public struct Countdown: Equatable, Sendable {
    /// When the cooldown ends (ms since the epoch, local clock).
    public var endsAt: Int64
    /// The whole cooldown (ms), for the progress fraction; at least the time remaining at the start.
    public var totalMilliseconds: Int64

    public init(endsAt: Int64, totalMilliseconds: Int64) {
        self.endsAt = endsAt
        self.totalMilliseconds = max(1, totalMilliseconds)
    }

    /// A countdown of `remaining` ms starting at `now`, out of a cooldown of `total` ms (nil: `remaining`).
    public init(now: Int64, remainingMilliseconds remaining: Int64, totalMilliseconds total: Int64?) {
        let remaining = max(0, remaining)
        self.init(endsAt: now + remaining, totalMilliseconds: max(total ?? remaining, remaining))
    }

    public func remaining(now: Int64) -> Int64 { max(0, endsAt - now) }

    public func isOver(now: Int64) -> Bool { now >= endsAt }

    /// The part of the cooldown already waited, 0 … 1.
    public func fraction(now: Int64) -> Double {
        let done = Double(totalMilliseconds - remaining(now: now)) / Double(totalMilliseconds)
        return min(1, max(0, done))
    }

    /// `Time remaining 1:45`.
    public func line(now: Int64) -> String { "Time remaining " + Self.minutesSeconds(remaining(now: now)) }

    /// `Time remaining 1:45 [██████░░░░░░░░░░░░░░]`: the line with a bar that fills as time passes.
    public func lineWithBar(now: Int64, width: Int = 20) -> String {
        line(now: now) + " " + Self.bar(fraction: fraction(now: now), width: width)
    }

    /// `m:ss` of a duration in ms, rounded up to whole seconds (so `0:00` only when nothing is
    /// left): 120000 → `2:00`, 104500 → `1:45`, 1 → `0:01`, 3725000 → `62:05`.
    /// The same text as the server's refusal message uses.
    public static func minutesSeconds(_ milliseconds: Int64) -> String {
        FeatureLimitResult.clock(milliseconds: milliseconds)
    }

    /// `[████░░░░]`: `fraction` of `width` cells filled (rounded down).
    public static func bar(fraction: Double, width: Int) -> String {
        let width = max(1, width)
        let filled = min(width, max(0, Int((fraction * Double(width)).rounded(.down))))
        return "[" + String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled) + "]"
    }

    /// The time in a refusal message such as `refreshOnlineUsers: limit of 2 reached; try again in 1:45`
    /// (`m:ss` or `h:mm:ss`), in ms; nil when there is none.
    public static func retryAfter(inMessage message: String) -> Int64? {
        guard let range = message.range(of: "try again in ") else { return nil }
        let rest = message[range.upperBound...].prefix { $0.isNumber || $0 == ":" }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false).map { Int64($0) }
        guard !parts.isEmpty, parts.count <= 3, parts.allSatisfy({ $0 != nil }) else { return nil }
        return parts.reduce(0) { $0 * 60 + $1! } * 1000
    }
}
