@testable import PresenceClient
import PresenceCore
import PresenceTesting
import Testing

@Suite struct WatchRefreshTests {
    @Test func pollingAfterThreeFailedAttemptsUntilAStableConnection() {
        let clock = ManualClock()
        var h = ConnectionHealth()
        h.connected(now: clock.now)
        clock.advance(byMilliseconds: 60_000)
        h.disconnected(now: clock.now)  // a long connection ended: not a failed attempt
        #expect(h.failures == 0 && !h.polling)
        h.disconnected(now: clock.now)
        h.disconnected(now: clock.now)
        #expect(!h.polling)
        h.connected(now: clock.now)
        clock.advance(byMilliseconds: 5000)
        h.disconnected(now: clock.now)  // up for 5 s only: counts as failed
        #expect(h.failures == 3 && h.polling)
        h.connected(now: clock.now)
        h.tick(now: clock.now + 29_999)
        #expect(h.polling)
        h.tick(now: clock.now + 30_000)
        #expect(!h.polling && h.failures == 0)
    }

    @Test func wordingIntervalFollowsTheShownText() {
        let now: Int64 = 1_700_000_000_000
        let online = PresenceRecord(uid: "a", online: true, lastSeen: now - 10)
        let minutes = PresenceRecord(uid: "b", online: false, lastSeen: now - 5 * 60_000)
        let hours = PresenceRecord(uid: "c", online: false, lastSeen: now - 3 * 3_600_000)
        let never = PresenceRecord(uid: "d")
        #expect(WatchRefresh.wordingInterval([online, hours, never], serverNow: now, countdown: false) == 60_000)
        #expect(WatchRefresh.wordingInterval([online, minutes, hours], serverNow: now, countdown: false) == 1000)
        #expect(WatchRefresh.wordingInterval([hours], serverNow: now, countdown: true) == 1000)
    }

    @Test func pollKindsPathsAndText() {
        #expect(WatchRefresh.pollKind("alice") == RefreshKind("poll/alice"))
        #expect(WatchRefresh.pollKind(nil) == RefreshKind("poll/*"))
        #expect(WatchRefresh.pollPath("alice") == Path(validated: ["users", "alice", "presence"]))
        #expect(WatchRefresh.pollPath(nil) == Path(validated: ["users"]))
        #expect(WatchRefresh.pollText(nextUpdate: 12_000, now: 0, running: false) == "next update in 12 s")
        #expect(WatchRefresh.pollText(nextUpdate: 11_001, now: 0, running: false) == "next update in 12 s")
        #expect(WatchRefresh.pollText(nextUpdate: 0, now: 5, running: false) == "next update in 0 s")
        #expect(WatchRefresh.pollText(nextUpdate: 12_000, now: 0, running: true) == "updating")
    }

    @Test func pollsRunThroughTheSchedulerWithJitterAndLimit() {
        let clock = ManualClock()
        let random = ScriptedRandom([0.5])
        var s = RefreshScheduler(store: InMemoryRefreshStore(), concurrencyLimit: 2, random: { random.next() })
        s.register(WatchRefresh.wordingKind, RefreshPolicy(intervalMilliseconds: 1000))
        s.recordSuccess(WatchRefresh.wordingKind, now: clock.now)
        for uid in ["alice", "bob", "carol"] { s.register(WatchRefresh.pollKind(uid), WatchRefresh.pollPolicy) }
        let first = s.takeDue(now: clock.now)
        #expect(first.map(\.kind.name) == ["poll/alice", "poll/bob"])
        for t in first { s.complete(t, success: true, now: clock.now) }
        #expect(s.takeDue(now: clock.now).map(\.kind.name) == ["poll/carol"])
        // 15 s plus half of the 3 s jitter span.
        #expect(s.nextRefresh(WatchRefresh.pollKind("alice"), now: clock.now) == clock.now + 16_500)
        clock.advance(byMilliseconds: 1000)
        #expect(s.takeDue(now: clock.now).map(\.kind.name) == ["last-seen-wording"])
    }
}
