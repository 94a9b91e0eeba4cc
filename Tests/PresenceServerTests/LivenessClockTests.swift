@testable import PresenceServer
import Testing

@Suite struct LivenessClockTests {
    @Test func aSilentConnectionIsPingedOnceThenDropped() {
        var clock = LivenessClock(now: 0)
        #expect(clock.check(now: 19_999, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .none)
        #expect(clock.check(now: 20_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .ping)
        #expect(clock.check(now: 40_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .none)
        #expect(clock.check(now: 60_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .hangUp(quietMilliseconds: 60_000))
        #expect(clock.check(now: 61_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .none)
        #expect(clock.hungUp)
    }

    @Test func anythingHeardResetsTheClockAndAllowsTheNextPing() {
        var clock = LivenessClock(now: 0)
        #expect(clock.check(now: 20_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .ping)
        clock.heard(at: 21_000)
        #expect(clock.check(now: 40_999, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .none)
        #expect(clock.check(now: 41_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: false) == .ping)
    }

    @Test func aClosingConnectionIsNotPingedButStillDroppedWhenSilent() {
        var clock = LivenessClock(now: 0)
        #expect(clock.check(now: 30_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: true) == .none)
        #expect(clock.check(now: 60_000, pingAfter: 20_000, hangUpAfter: 60_000, closing: true) == .hangUp(quietMilliseconds: 60_000))
    }

    @Test func theSweepRunsFourTimesPerPingIntervalWithinBounds() {
        #expect(LivenessSweep.period(pingIntervalSeconds: 1) == 250)
        #expect(LivenessSweep.period(pingIntervalSeconds: 2) == 500)
        #expect(LivenessSweep.period(pingIntervalSeconds: 20) == 1_000)
    }
}
