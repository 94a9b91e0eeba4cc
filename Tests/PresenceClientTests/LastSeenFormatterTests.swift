import Testing
@testable import PresenceClient

@Suite struct LastSeenFormatterTests {
    let f = LastSeenFormatter()
    let now: Int64 = 1_709_640_000_000  // 2024-03-05 12:00:00 UTC

    @Test func wording() {
        #expect(f.relative(lastSeen: now, now: now) == "just now")
        #expect(f.relative(lastSeen: now - 59_999, now: now) == "just now")
        #expect(f.relative(lastSeen: now + 5000, now: now) == "just now")  // clock skew
        #expect(f.relative(lastSeen: now - 60_000, now: now) == "1m ago")
        #expect(f.relative(lastSeen: now - 5 * 60_000, now: now) == "5m ago")
        #expect(f.relative(lastSeen: now - 59 * 60_000, now: now) == "59m ago")
        #expect(f.relative(lastSeen: now - 3_600_000, now: now) == "1h ago")
        #expect(f.relative(lastSeen: now - 23 * 3_600_000, now: now) == "23h ago")
        #expect(f.relative(lastSeen: now - 24 * 3_600_000, now: now) == "yesterday")
        #expect(f.relative(lastSeen: now - 47 * 3_600_000, now: now) == "yesterday")
        #expect(f.relative(lastSeen: now - 2 * 86_400_000, now: now) == "2 days ago")
        #expect(f.relative(lastSeen: now - 6 * 86_400_000, now: now) == "6 days ago")
        #expect(f.relative(lastSeen: now - 7 * 86_400_000, now: now) == "Feb 27, 2024")
    }

    @Test func rows() {
        #expect(f.row(online: true, lastSeen: now - 999_999, now: now) == "● Online")
        #expect(f.row(online: false, lastSeen: now - 300_000, now: now) == "○ Last seen 5m ago")
        #expect(f.row(online: nil, lastSeen: nil, now: now) == "○ Never seen")
    }

    @Test func datesUseTheTimeZone() {
        let utc = LastSeenFormatter(timeZoneOffsetSeconds: 0)
        let tokyo = LastSeenFormatter(timeZoneOffsetSeconds: 9 * 3600)
        let lateEvening: Int64 = 1_704_063_600_000  // 2023-12-31 23:00 UTC
        #expect(utc.date(lateEvening) == "Dec 31, 2023")
        #expect(tokyo.date(lateEvening) == "Jan 1, 2024")
        #expect(utc.date(0) == "Jan 1, 1970")
        #expect(utc.date(951_782_400_000) == "Feb 29, 2000")
    }
}
