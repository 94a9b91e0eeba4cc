@testable import PresenceClient
import PresenceCore
import PresenceTesting
import Testing

@Suite struct CountdownTests {
    @Test func minutesSeconds() {
        #expect(Countdown.minutesSeconds(120_000) == "2:00")
        #expect(Countdown.minutesSeconds(104_500) == "1:45")
        #expect(Countdown.minutesSeconds(105_000) == "1:45")
        #expect(Countdown.minutesSeconds(59_001) == "1:00")
        #expect(Countdown.minutesSeconds(9_000) == "0:09")
        #expect(Countdown.minutesSeconds(1) == "0:01")
        #expect(Countdown.minutesSeconds(0) == "0:00")
        #expect(Countdown.minutesSeconds(-5) == "0:00")
        #expect(Countdown.minutesSeconds(3_725_000) == "62:05")
    }

    @Test func countsDownWithTheClock() {
        let clock = ManualClock()
        let c = Countdown(now: clock.now, remainingMilliseconds: 120_000, totalMilliseconds: 120_000)
        #expect(c.line(now: clock.now) == "Time remaining 2:00")
        #expect(c.fraction(now: clock.now) == 0)
        clock.advance(byMilliseconds: 15_000)
        #expect(c.line(now: clock.now) == "Time remaining 1:45")
        #expect(c.fraction(now: clock.now) == 0.125)
        clock.advance(byMilliseconds: 45_000)
        #expect(c.fraction(now: clock.now) == 0.5)
        #expect(c.lineWithBar(now: clock.now, width: 10) == "Time remaining 1:00 [█████░░░░░]")
        clock.advance(byMilliseconds: 59_500)
        #expect(c.line(now: clock.now) == "Time remaining 0:01")
        #expect(!c.isOver(now: clock.now))
        clock.advance(byMilliseconds: 500)
        #expect(c.isOver(now: clock.now))
        #expect(c.lineWithBar(now: clock.now, width: 4) == "Time remaining 0:00 [████]")
        #expect(c.fraction(now: clock.now + 10_000) == 1)
    }

    @Test func partOfACooldown() {
        // 104.5 s left of 120: the bar starts partly full.
        let c = Countdown(now: 0, remainingMilliseconds: 104_500, totalMilliseconds: 120_000)
        #expect(c.line(now: 0) == "Time remaining 1:45")
        #expect(abs(c.fraction(now: 0) - 15.5 / 120) < 1e-9)
        #expect(c.lineWithBar(now: 0, width: 20) == "Time remaining 1:45 [██░░░░░░░░░░░░░░░░░░]")
        // Unknown total: the remaining time is the whole.
        let u = Countdown(now: 0, remainingMilliseconds: 30_000, totalMilliseconds: nil)
        #expect(u.fraction(now: 0) == 0 && u.totalMilliseconds == 30_000)
        // A total shorter than what is left is stretched.
        #expect(Countdown(now: 0, remainingMilliseconds: 30_000, totalMilliseconds: 10_000).totalMilliseconds == 30_000)
    }

    @Test func bars() {
        #expect(Countdown.bar(fraction: 0, width: 5) == "[░░░░░]")
        #expect(Countdown.bar(fraction: 0.99, width: 5) == "[████░]")
        #expect(Countdown.bar(fraction: 2, width: 3) == "[███]")
        #expect(Countdown.bar(fraction: -1, width: 3) == "[░░░]")
    }

    @Test func retryAfterInRefusals() {
        #expect(Countdown.retryAfter(inMessage: "refreshOnlineUsers: limit of 2 reached; try again in 1:45") == 105_000)
        #expect(Countdown.retryAfter(inMessage: "try again in 1:02:03") == 3_723_000)
        #expect(Countdown.retryAfter(inMessage: "try again in 0:09.") == 9_000)
        #expect(Countdown.retryAfter(inMessage: "limit reached") == nil)
        #expect(Countdown.retryAfter(inMessage: "try again in soon") == nil)
    }
}
