import PresenceCore

/// The refresh kinds of `watch` and their intervals, for a ``RefreshScheduler``.
public enum WatchRefresh {
    /// Redraws the `Last seen …` wording as time passes.
    public static let wordingKind: RefreshKind = "last-seen-wording"

    /// The poll of one user's presence (`users/{uid}/presence`), or of every user (`users`) for `nil`.
    public static func pollKind(_ uid: String?) -> RefreshKind { RefreshKind("poll/" + (uid ?? "*")) }

    /// The path a poll reads.
    public static func pollPath(_ uid: String?) -> Path {
        uid.map { Path(validated: ["users", $0, "presence"]) } ?? Path(validated: ["users"])
    }

    /// The poll policy: every 15 s with 20 % jitter (polls of many users and many watchers drift
    /// apart), 5 s after a failure.
    public static let pollPolicy = RefreshPolicy(intervalMilliseconds: 15_000, jitter: 0.2, retryMilliseconds: 5_000)

    /// How often the wording must be redrawn: every second while a row shows seconds-sensitive text
    /// (`just now`, `Nm ago`: it changes on a minute boundary, so a 1 s redraw is at most a second
    /// late) or a countdown is shown; otherwise every minute (`Nh ago` and coarser).
    public static func wordingInterval(_ records: [PresenceRecord], serverNow: Int64, countdown: Bool) -> Int64 {
        if countdown { return 1000 }
        for record in records where record.online != true {
            if let lastSeen = record.lastSeen, serverNow - lastSeen < 3_600_000 { return 1000 }
        }
        return 60_000
    }

    /// The footer while polling: `next update in 12 s` (`updating` while polls are out).
    public static func pollText(nextUpdate: Int64?, now: Int64, running: Bool) -> String {
        if running { return "updating" }
        guard let next = nextUpdate else { return "updating" }
        return "next update in \((max(0, next - now) + 999) / 1000) s"
    }
}
