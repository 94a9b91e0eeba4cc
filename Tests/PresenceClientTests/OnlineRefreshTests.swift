import Foundation
@testable import PresenceClient
import PresenceCore
import PresenceTesting
import Testing

@Suite struct OnlineRefreshTests {
    func status(_ text: String) -> FeatureLimitStatus {
        FeatureLimitStatus(json: try! JSONParser.parse(text))!
    }

    let free1 = """
        {"limit": 2, "currentUsage": 1, "remaining": 1, "canProceed": true, "showPopup": true,
         "remainingCooldown": 0, "cooldownSeconds": 120, "tier": "free", "unlimited": false, "location": "online-users"}
        """
    let cooling = """
        {"limit": 2, "currentUsage": 2, "remaining": 0, "canProceed": false, "showPopup": true,
         "remainingCooldown": 104.5, "cooldownSeconds": 120, "tier": "free", "unlimited": false, "location": "online-users"}
        """
    let lite = """
        {"unlimited": true, "limit": null, "remaining": null, "canProceed": true, "showPopup": false,
         "remainingCooldown": 0, "cooldownSeconds": null, "currentUsage": 7, "tier": "lite", "location": "online-users"}
        """

    @Test func freshCacheIsShownStaleOrMissingOrForcedRefreshes() {
        #expect(OnlineRefresh.start(hasCache: true, stale: false, force: false) == .showCache)
        #expect(OnlineRefresh.start(hasCache: true, stale: true, force: false) == .refresh)
        #expect(OnlineRefresh.start(hasCache: false, stale: false, force: false) == .refresh)
        #expect(OnlineRefresh.start(hasCache: true, stale: false, force: true) == .refresh)
    }

    @Test func cacheAgeThroughTheSchedulerWithMaxAge() {
        let clock = ManualClock()
        let store = InMemoryRefreshStore()
        func decide() -> OnlineRefresh.Start {
            var s = RefreshScheduler(store: store, concurrencyLimit: 1, random: { 0 })
            s.register(OnlineRefresh.kind, RefreshPolicy(intervalMilliseconds: OnlineRefresh.defaultMaxAgeSeconds * 1000))
            return OnlineRefresh.start(hasCache: true, stale: s.shouldRefresh(OnlineRefresh.kind, now: clock.now), force: false)
        }
        #expect(decide() == .refresh)  // never refreshed
        var s = RefreshScheduler(store: store, concurrencyLimit: 1, random: { 0 })
        s.register(OnlineRefresh.kind, RefreshPolicy(intervalMilliseconds: 1_800_000))
        let t = s.start(OnlineRefresh.kind, now: clock.now)!
        s.complete(t, success: true, now: clock.now)
        clock.advance(byMilliseconds: 29 * 60_000)
        #expect(decide() == .showCache)
        clock.advance(byMilliseconds: 60_000)
        #expect(decide() == .refresh)
    }

    @Test func readsTheStatusShapes() {
        let a = status(free1)
        #expect(a == FeatureLimitStatus(unlimited: false, limit: 2, currentUsage: 1, remaining: 1, canProceed: true,
                                        showPopup: true, remainingCooldownMilliseconds: 0, cooldownMilliseconds: 120_000,
                                        tier: "free", location: "online-users"))
        let c = status(cooling)
        #expect(c.remainingCooldownMilliseconds == 104_500 && c.inCooldown && !c.canProceed)
        let l = status(lite)
        #expect(l.unlimited && l.limit == nil && l.cooldownMilliseconds == nil && l.tier == "lite" && !l.inCooldown)
        #expect(FeatureLimitStatus(json: .null) == .unconfiguredStatus)
        #expect(FeatureLimitStatus(json: nil)?.unlimited == true)
        #expect(FeatureLimitStatus(json: .string("nope")) == nil)
    }

    @Test func decisions() {
        #expect(OnlineRefresh.decide(status(free1)) == .refresh)
        #expect(OnlineRefresh.decide(status(lite)) == .refresh)
        #expect(OnlineRefresh.decide(.unconfiguredStatus) == .refresh)
        #expect(OnlineRefresh.decide(status(cooling)) == .cooldown(remainingMilliseconds: 104_500, totalMilliseconds: 120_000))
        // Refused with no cooldown running (no tier, or uses that never come back): the server says why.
        var spent = status(cooling)
        spent.remainingCooldownMilliseconds = 0
        #expect(OnlineRefresh.decide(spent) == .refresh)
        // A cooldown shorter than a second still waits a second: never a tight loop.
        var ending = status(cooling)
        ending.remainingCooldownMilliseconds = 3
        #expect(OnlineRefresh.decide(ending) == .cooldown(remainingMilliseconds: 1000, totalMilliseconds: 120_000))
    }

    @Test func refusedAnywayRereadsTheStatusElseTheMessage() {
        let message = "refreshOnlineUsers: limit of 2 reached; try again in 1:45"
        #expect(OnlineRefresh.afterRefusal(status: status(cooling), message: message)
                == .cooldown(remainingMilliseconds: 104_500, totalMilliseconds: 120_000))
        #expect(OnlineRefresh.afterRefusal(status: status(free1), message: message)
                == .cooldown(remainingMilliseconds: 105_000, totalMilliseconds: 120_000))
        #expect(OnlineRefresh.afterRefusal(status: nil, message: message)
                == .cooldown(remainingMilliseconds: 105_000, totalMilliseconds: nil))
        #expect(OnlineRefresh.afterRefusal(status: nil, message: "slow down")
                == .cooldown(remainingMilliseconds: 1000, totalMilliseconds: nil))
        // Spent for good (no time in the message, no cooldown in the status): no waiting helps.
        var spent = status(cooling)
        spent.remainingCooldownMilliseconds = 0
        #expect(OnlineRefresh.afterRefusal(status: spent, message: "trial: limit of 1 use reached") == .blocked)
    }

    @Test func usesLines() {
        var s = status(free1)
        s.remaining = 2
        s.limit = 3
        #expect(OnlineRefresh.usesLine(s) == "Refreshes: 2 left of 3")
        #expect(OnlineRefresh.usesLine(status(free1)) == "Refreshes: 1 left of 2")
        var last = status(cooling)
        last.remainingCooldownMilliseconds = 120_000
        #expect(OnlineRefresh.usesLine(last) == "Refreshes: 0 left of 2 (next in 2:00)")
        #expect(OnlineRefresh.usesLine(status(lite)) == "Refreshes: unlimited (lite)")
        #expect(OnlineRefresh.usesLine(.unconfiguredStatus) == "Refreshes: unlimited")
    }

    @Test func oneUseLessWhenTheStatusCannotBeReadAgain() {
        let after = OnlineRefresh.afterOneUse(status(free1))
        #expect(after.remaining == 0 && after.currentUsage == 2 && !after.canProceed)
        #expect(OnlineRefresh.usesLine(after) == "Refreshes: 0 left of 2 (next in 2:00)")
        var two = status(free1)
        two.currentUsage = 0
        two.remaining = 2
        #expect(OnlineRefresh.usesLine(OnlineRefresh.afterOneUse(two)) == "Refreshes: 1 left of 2")
        #expect(OnlineRefresh.usesLine(OnlineRefresh.afterOneUse(status(lite))) == "Refreshes: unlimited (lite)")
    }

    @Test func headersAndRows() {
        #expect(OnlineRefresh.header(count: 2, fromCache: false, ageMilliseconds: 0) == "2 online (refreshed just now)")
        #expect(OnlineRefresh.header(count: 0, fromCache: true, ageMilliseconds: 59_999) == "0 online (cached just now)")
        #expect(OnlineRefresh.header(count: 3, fromCache: true, ageMilliseconds: 12 * 60_000 + 5000) == "3 online (cached 12m ago)")
        #expect(OnlineRefresh.ageText(3 * 3_600_000) == "3h ago")
        #expect(OnlineRefresh.ageText(2 * 86_400_000) == "2d ago")
        let f = LastSeenFormatter()
        let now: Int64 = 1_709_640_000_000
        let alice = PresenceRecord(uid: "alice", online: true, lastSeen: now - 5 * 60_000)
        #expect(OnlineRefresh.row(alice, width: 8, formatter: f, serverNow: now) == "alice   ● Online  Last seen 5m ago")
        let bob = PresenceRecord(uid: "bob", online: true, lastSeen: nil)
        #expect(OnlineRefresh.row(bob, width: 8, formatter: f, serverNow: now) == "bob     ● Online")
        #expect(OnlineRefresh.uidWidth([alice, bob]) == 8)
        #expect(JSONWriter.string(OnlineRefresh.userJSON(alice, formatter: f, serverNow: now))
                == "{\"uid\":\"alice\",\"online\":true,\"lastSeen\":1709639700000,\"status\":\"Online\",\"lastSeenText\":\"5m ago\"}")
    }

    @Test func onlineUsersReplyAndCacheFile() throws {
        let reply = try JSONParser.parse("{\"bob\":{\"online\":true,\"lastSeen\":2000},\"alice\":{\"online\":true,\"lastSeen\":1000},\"eve\":{}}")
        let users = OnlineUsersCache.users(from: reply)
        #expect(users.map(\.uid) == ["alice", "bob", "eve"])
        #expect(users[0] == PresenceRecord(uid: "alice", online: true, lastSeen: 1000))
        #expect(users[2].online == true)
        #expect(OnlineUsersCache.users(from: .null).isEmpty)
        #expect(OnlineUsersCache.users(from: nil).isEmpty)

        let cache = OnlineUsersCache(fetchedAt: 5000, serverTimeOffset: -20, users: users)
        #expect(OnlineUsersCache(json: cache.json) == cache)
        #expect(cache.age(now: 65_000) == 60_000)
        #expect(OnlineUsersCache(json: try JSONParser.parse("{\"version\":99,\"fetchedAt\":1}")) == nil)

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("online-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a/b.json").path
        #expect(OnlineUsersCache.load(path: path) == nil)
        try cache.save(path: path)
        #expect(OnlineUsersCache.load(path: path) == cache)
    }

    @Test func cacheFileNames() {
        #expect(CacheFile.key(server: "ws://127.0.0.1:9000", namespace: "", uid: "bob") == "127.0.0.1_9000-default-bob")
        #expect(CacheFile.key(server: "wss://chat.example.com:443/", namespace: "demo", uid: nil)
                == "chat.example.com_443-demo-anonymous")
        #expect(CacheFile.key(server: "ws://h:1", namespace: "a-b", uid: "é/x") == "h_1-a%2Db-%C3%A9%2Fx")
        #expect(CacheFile.directory(environment: ["XDG_CACHE_HOME": "/c", "HOME": "/h"]) == "/c/presence-client")
        #expect(CacheFile.directory(environment: ["XDG_CACHE_HOME": "relative", "HOME": "/h"]) == "/h/.cache/presence-client")
        #expect(CacheFile.directory(environment: ["HOME": "/h"]) == "/h/.cache/presence-client")
    }
}
