import Foundation
@testable import PresenceClient
import PresenceTesting
import Testing

@Suite struct RefreshSchedulerTests {
    let minute: Int64 = 60_000

    func scheduler(_ store: InMemoryRefreshStore = InMemoryRefreshStore(), limit: Int = 4,
                   random: ScriptedRandom = ScriptedRandom([0])) -> RefreshScheduler {
        RefreshScheduler(store: store, concurrencyLimit: limit, random: { random.next() })
    }

    @Test func neverRefreshedIsDueAtOnceThenAfterTheInterval() {
        let clock = ManualClock()
        var s = scheduler()
        s.register("online-users", RefreshPolicy(intervalMilliseconds: 30 * minute))
        #expect(s.shouldRefresh("online-users", now: clock.now))
        #expect(s.nextRefresh("online-users", now: clock.now) == clock.now)
        let t = s.takeDue(now: clock.now)
        #expect(t.map(\.kind) == ["online-users"])
        s.complete(t[0], success: true, now: clock.now)
        #expect(s.lastSuccess("online-users") == clock.now)
        #expect(!s.shouldRefresh("online-users", now: clock.now))
        #expect(s.nextRefresh("online-users", now: clock.now) == clock.now + 30 * minute)
        clock.advance(byMilliseconds: 30 * minute - 1)
        #expect(!s.shouldRefresh("online-users", now: clock.now))
        #expect(s.takeDue(now: clock.now).isEmpty)
        #expect(s.age("online-users", now: clock.now) == 30 * minute - 1)
        clock.advance(byMilliseconds: 1)
        #expect(s.shouldRefresh("online-users", now: clock.now))
        #expect(s.takeDue(now: clock.now).count == 1)
    }

    @Test func jitterDelaysWithinItsBoundsAndIsDrawnOncePerInterval() {
        let clock = ManualClock()
        let random = ScriptedRandom([0.5, 0.999_999, 0])
        var s = scheduler(random: random)
        s.register("poll", RefreshPolicy(intervalMilliseconds: 10_000, jitter: 0.2))
        s.recordSuccess("poll", now: clock.now)  // draws 0.5 → +1000
        #expect(s.nextRefresh("poll", now: clock.now) == clock.now + 11_000)
        #expect(s.nextRefresh("poll", now: clock.now) == clock.now + 11_000)  // not re-drawn
        #expect(random.calls == 1)
        // Staleness ignores the jitter.
        #expect(s.shouldRefresh("poll", now: clock.now + 10_000))
        #expect(s.takeDue(now: clock.now + 10_999).isEmpty)
        let t = s.takeDue(now: clock.now + 11_000)
        clock.advance(byMilliseconds: 11_000)
        s.complete(t[0], success: true, now: clock.now)  // draws 0.999999 → just under 2000
        #expect(s.nextRefresh("poll", now: clock.now) == clock.now + 11_999)
        s.recordSuccess("poll", now: clock.now)  // draws 0 → no extra
        #expect(s.nextRefresh("poll", now: clock.now) == clock.now + 10_000)
    }

    @Test func jitterStaysInBoundsForAnySource() {
        for i in 0...20 {
            let u = Double(i) / 20
            var s = scheduler(random: ScriptedRandom([u]))
            s.register("k", RefreshPolicy(intervalMilliseconds: 60_000, jitter: 0.25))
            s.recordSuccess("k", now: 0)
            let next = s.nextRefresh("k", now: 0)
            #expect(next >= 60_000 && next < 75_000)
        }
        var none = scheduler(random: ScriptedRandom([0.9]))
        none.register("k", RefreshPolicy(intervalMilliseconds: 60_000))
        none.recordSuccess("k", now: 0)
        #expect(none.nextRefresh("k", now: 0) == 60_000)
    }

    @Test func lastSuccessSurvivesANewSchedulerOnTheSameStore() {
        let clock = ManualClock()
        let store = InMemoryRefreshStore()
        var first = scheduler(store)
        first.register("online-users", RefreshPolicy(intervalMilliseconds: 30 * minute))
        let t = first.takeDue(now: clock.now)
        first.complete(t[0], success: true, now: clock.now)
        #expect(store.timestamps == ["online-users": clock.now])

        clock.advance(byMilliseconds: 10 * minute)
        var second = scheduler(store)
        second.register("online-users", RefreshPolicy(intervalMilliseconds: 30 * minute))
        #expect(second.lastSuccess("online-users") == clock.now - 10 * minute)
        #expect(!second.shouldRefresh("online-users", now: clock.now))
        #expect(second.takeDue(now: clock.now).isEmpty)
        // Another interval (a different --max-age) on the same timestamp.
        var third = scheduler(store)
        third.register("online-users", RefreshPolicy(intervalMilliseconds: 5 * minute))
        #expect(third.shouldRefresh("online-users", now: clock.now))
    }

    @Test func fileStoreKeepsTimestampsAcrossInstances() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("refresh-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("sub/schedule.json").path
        #expect(FileRefreshStore(path: path).load().isEmpty)  // missing file: nothing known
        var s = RefreshScheduler(store: FileRefreshStore(path: path), random: { 0 })
        s.register("online-users", RefreshPolicy(intervalMilliseconds: 1000))
        s.recordSuccess("online-users", now: 1_700_000_000_123)
        #expect(CacheFile.read(path) == "{\"online-users\":1700000000123}\n")
        let again = RefreshScheduler(store: FileRefreshStore(path: path), random: { 0 })
        #expect(again.lastSuccess("online-users") == 1_700_000_000_123)
        try "not json".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(FileRefreshStore(path: path).load().isEmpty)
    }

    @Test func failuresDoNotMoveTheTimestampAndWaitTheRetryDelay() {
        let clock = ManualClock()
        let store = InMemoryRefreshStore()
        var s = scheduler(store)
        s.register("k", RefreshPolicy(intervalMilliseconds: 60_000, retryMilliseconds: 5000))
        s.recordSuccess("k", now: clock.now)
        let savedAt = clock.now
        clock.advance(byMilliseconds: 60_000)
        let t = s.takeDue(now: clock.now)
        #expect(t.count == 1)
        let outcome = s.complete(t[0], success: false, now: clock.now)
        #expect(outcome == RefreshScheduler.Outcome(kind: "k", success: false, lastSuccess: savedAt, nextRefresh: clock.now + 5000))
        #expect(s.lastSuccess("k") == savedAt)
        #expect(store.timestamps["k"] == savedAt)
        #expect(store.saves == 1)
        #expect(s.shouldRefresh("k", now: clock.now))  // still stale
        #expect(s.takeDue(now: clock.now + 4999).isEmpty)
        let retry = s.takeDue(now: clock.now + 5000)
        #expect(retry.count == 1)
        s.complete(retry[0], success: true, now: clock.now + 5000)
        #expect(s.lastSuccess("k") == clock.now + 5000)
        #expect(store.saves == 2)
    }

    @Test func concurrencyLimitHandsOutAtMostThatManyEarliestFirst() {
        let clock = ManualClock()
        var s = scheduler(limit: 2)
        for (i, uid) in ["a", "b", "c", "d"].enumerated() {
            s.register(RefreshKind("poll/\(uid)"), RefreshPolicy(intervalMilliseconds: 10_000))
            s.recordSuccess(RefreshKind("poll/\(uid)"), now: clock.now - Int64(4 - i) * 1000)  // d is the newest
        }
        clock.advance(byMilliseconds: 10_000)
        let first = s.takeDue(now: clock.now)
        #expect(first.map(\.kind.name) == ["poll/a", "poll/b"])
        #expect(s.takeDue(now: clock.now).isEmpty)  // at the limit
        #expect(s.start("poll/c", now: clock.now) == nil)
        #expect(s.runningTickets == first)
        #expect(s.isRunning("poll/a"))
        s.complete(first[1], success: false, now: clock.now)
        let second = s.takeDue(now: clock.now)
        #expect(second.map(\.kind.name) == ["poll/c"])  // b waits for its retry delay
        s.complete(first[0], success: true, now: clock.now)
        #expect(s.takeDue(now: clock.now).map(\.kind.name) == ["poll/d"])
        #expect(s.takeDue(now: clock.now).isEmpty)
    }

    @Test func eachRefreshReportsItsOwnResult() {
        let clock = ManualClock()
        var s = scheduler(limit: 3)
        for kind in ["x", "y", "z"] { s.register(RefreshKind(kind), RefreshPolicy(intervalMilliseconds: 1000, retryMilliseconds: 500)) }
        let tickets = s.takeDue(now: clock.now)
        #expect(tickets.count == 3)
        clock.advance(byMilliseconds: 100)
        let ox = s.complete(tickets[0], success: true, now: clock.now)
        let oy = s.complete(tickets[1], success: false, now: clock.now)
        clock.advance(byMilliseconds: 50)
        let oz = s.complete(tickets[2], success: true, now: clock.now)
        #expect(ox?.success == true && ox?.lastSuccess == clock.now - 50 && ox?.nextRefresh == clock.now + 950)
        #expect(oy?.success == false && oy?.lastSuccess == nil && oy?.nextRefresh == clock.now + 450)
        #expect(oz?.success == true && oz?.lastSuccess == clock.now)
        #expect(s.complete(tickets[0], success: false, now: clock.now) == nil)  // reported once only
        #expect(s.lastSuccess("x") == clock.now - 50)
        #expect(s.lastSuccess("y") == nil)
        #expect(s.nextDeadline(now: clock.now) == clock.now + 450)
    }

    @Test func oneTicketPerKindAndForcedStarts() {
        let clock = ManualClock()
        var s = scheduler()
        s.register("k", RefreshPolicy(intervalMilliseconds: 60_000))
        s.recordSuccess("k", now: clock.now)
        #expect(s.takeDue(now: clock.now).isEmpty)
        let forced = s.start("k", now: clock.now)  // --refresh: not due, started anyway
        #expect(forced != nil)
        #expect(s.start("k", now: clock.now) == nil)
        #expect(s.takeDue(now: clock.now + 120_000).isEmpty)  // due, but running
        #expect(s.nextDeadline(now: clock.now) == nil)
        #expect(s.start("unknown", now: clock.now) == nil)
        s.cancel("k")
        #expect(!s.isRunning("k"))
    }
}
