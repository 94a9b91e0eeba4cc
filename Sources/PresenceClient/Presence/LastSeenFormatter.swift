/// The seed app's wording for a user's presence: `● Online`, or `○ Last seen <when>` with `when`
/// one of `just now`, `Nm ago`, `Nh ago`, `yesterday`, `N days ago`, then a date (`Mar 5, 2024`).
/// Pure: `now` and the time zone offset are inputs.
public struct LastSeenFormatter: Sendable {
    /// Seconds east of UTC, for the date form.
    public var timeZoneOffsetSeconds: Int64

    public init(timeZoneOffsetSeconds: Int64 = 0) {
        self.timeZoneOffsetSeconds = timeZoneOffsetSeconds
    }

    /// How long ago `lastSeen` was (both in ms since the epoch).
    public func relative(lastSeen: Int64, now: Int64) -> String {
        let seconds = max(0, (now - lastSeen) / 1000)
        switch seconds {
        case ..<60: return "just now"
        case ..<3600: return "\(seconds / 60)m ago"
        case ..<86_400: return "\(seconds / 3600)h ago"
        case ..<(2 * 86_400): return "yesterday"
        case ..<(7 * 86_400): return "\(seconds / 86_400) days ago"
        default: return date(lastSeen)
        }
    }

    /// The status text: `Online`, `Last seen 5m ago`, or `Never seen` when nothing is known.
    public func status(online: Bool?, lastSeen: Int64?, now: Int64) -> String {
        if online == true { return "Online" }
        guard let lastSeen else { return online == nil ? "Never seen" : "Offline" }
        return "Last seen \(relative(lastSeen: lastSeen, now: now))"
    }

    /// The row text with its marker: `● Online` or `○ Last seen …`.
    public func row(online: Bool?, lastSeen: Int64?, now: Int64) -> String {
        (online == true ? "● " : "○ ") + status(online: online, lastSeen: lastSeen, now: now)
    }

    /// `Mar 5, 2024` in the configured time zone.
    public func date(_ milliseconds: Int64) -> String {
        let days = Int64((Double(milliseconds / 1000 + timeZoneOffsetSeconds) / 86_400).rounded(.down))
        let (y, m, d) = Self.civil(fromDays: days)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return "\(months[Int(m) - 1]) \(d), \(y)"
    }

    /// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
