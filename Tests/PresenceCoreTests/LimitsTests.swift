import Foundation
import PresenceCore
import PresenceTesting
import Testing

/// The seed app's refresh limits, enforced by the engine with one (manual) clock.
@Suite struct LimitsTests {
    static let seedFile = """
        {"limits": {"refreshOnlineUsers": {"location": "online-users", "tiers": [
          {"name": "lite", "when": "auth.token.subscription == 'lite'", "unlimited": true},
          {"name": "new-user", "when": "now - auth.token.created_at < 7200000", "unlimited": true},
          {"name": "free", "when": "auth != null", "limit": LIMIT, "cooldownSeconds": 120}
        ]}}}
        """

    static func limits(limit: Int = 2) throws -> LimitSet {
        try LimitSet.load(text: seedFile.replacingOccurrences(of: "LIMIT", with: String(limit)), source: "limits.json")
    }

    static let rules = try! RuleSet.load(
        text: #"{"rules": {"online-users": {".read": "auth != null"}, "users": {"$uid": {".read": true, ".write": "auth.uid == $uid"}}}}"#,
        source: "test")

    func harness(limit: Int = 2) throws -> EngineHarness {
        let harness = EngineHarness(policy: Self.rules)
        harness.engine.setLimits(try Self.limits(limit: limit))
        return harness
    }

    /// `g` of the online list: "ok" or the refusal's status and message.
    func refresh(_ harness: EngineHarness, _ id: ConnectionID) -> String {
        harness.request(7, "g", #"{"p":"/online-users","q":{}}"#, from: id)
        let reply = harness.take(id).last ?? ""
        if reply.hasPrefix(#"{"t":"d","d":{"r":7,"b":{"s":"ok""#) { return "ok" }
        return reply
    }

    func status(_ harness: EngineHarness, _ id: ConnectionID) throws -> JSON {
        harness.request(8, "g", #"{"p":"/feature-limits/refreshOnlineUsers","q":{}}"#, from: id)
        let reply = try JSONParser.parse(harness.take(id).last ?? "")
        #expect(reply["d"]?["b"]?["s"] == "ok")
        return reply["d"]?["b"]?["d"] ?? .null
    }

    static func refused(_ message: String) -> String {
        #"{"t":"d","d":{"r":7,"b":{"s":"rate_limited","d":""# + message + #""}}}"#
    }

    @Test func freeUserTwoUsesThenCooldownThatResetsExactlyAtItsEnd() throws {
        let harness = try harness()
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        var s = try status(harness, id)
        #expect(s == .object([
            ("limit", 2), ("currentUsage", 0), ("remaining", 2), ("canProceed", true), ("showPopup", true),
            ("remainingCooldown", 0), ("cooldownSeconds", 120), ("tier", "free"), ("unlimited", false), ("location", "online-users"),
        ]))
        #expect(refresh(harness, id) == "ok")
        #expect(try status(harness, id)["remaining"] == 1)  // "1 left"
        harness.advance(byMilliseconds: 10_000)
        #expect(refresh(harness, id) == "ok")
        s = try status(harness, id)
        #expect(s["remaining"] == 0 && s["canProceed"] == false && s["remainingCooldown"] == 120)
        // Blocked with 2:00 left, consuming nothing.
        #expect(refresh(harness, id) == Self.refused("refreshOnlineUsers: limit of 2 uses reached; try again in 2:00"))
        harness.advance(byMilliseconds: 15_000)
        #expect(refresh(harness, id) == Self.refused("refreshOnlineUsers: limit of 2 uses reached; try again in 1:45"))
        #expect(try status(harness, id)["remainingCooldown"] == 105)
        harness.advance(byMilliseconds: 104_999)
        #expect(refresh(harness, id) == Self.refused("refreshOnlineUsers: limit of 2 uses reached; try again in 0:01"))
        #expect(try status(harness, id)["remainingCooldown"] == 0.001)
        harness.advance(byMilliseconds: 1)  // exactly 120 s after the second use
        s = try status(harness, id)
        #expect(s["currentUsage"] == 0 && s["remaining"] == 2 && s["canProceed"] == true && s["remainingCooldown"] == 0)
        #expect(refresh(harness, id) == "ok")
        #expect(try status(harness, id)["remaining"] == 1)
    }

    @Test func checksAreEventsWithTierAndOutcome() throws {
        let harness = try harness()
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        _ = try status(harness, id)
        _ = refresh(harness, id)
        _ = refresh(harness, id)
        _ = refresh(harness, id)
        harness.advance(byMilliseconds: 120_000)
        _ = refresh(harness, id)
        let events = harness.engine.takeLimitEvents()
        #expect(events.map(\.outcome) == [.checked, .performed, .performed, .cooldownStarted, .blockedByCooldown, .cooldownCompleted, .performed])
        #expect(events.allSatisfy { $0.tier == "free" && $0.uid == "alice" && $0.limit == "refreshOnlineUsers" && $0.namespace == "test" })
        // The completion is stamped with the moment the cooldown ended, not when it was noticed.
        #expect(events[5].at == events[3].at + 120_000)
        #expect(harness.engine.takeLimitEvents().isEmpty)
    }

    @Test func aChangedFileAppliesFromTheNextCheck() throws {
        let harness = try harness()
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        #expect(refresh(harness, id) == "ok")
        #expect(refresh(harness, id) == "ok")
        #expect(refresh(harness, id) != "ok")
        harness.engine.setLimits(try Self.limits(limit: 5))
        let s = try status(harness, id)
        #expect(s["limit"] == 5 && s["currentUsage"] == 2 && s["remaining"] == 3 && s["canProceed"] == true && s["remainingCooldown"] == 0)
        for _ in 0..<3 { #expect(refresh(harness, id) == "ok") }
        #expect(refresh(harness, id) == Self.refused("refreshOnlineUsers: limit of 5 uses reached; try again in 2:00"))
        // Lowering the limit below the count starts the cooldown at the next check.
        harness.advance(byMilliseconds: 120_000)
        #expect(refresh(harness, id) == "ok")
        harness.engine.setLimits(try Self.limits(limit: 1))
        #expect(refresh(harness, id) == Self.refused("refreshOnlineUsers: limit of 1 use reached; try again in 2:00"))
    }

    @Test func liteAndNewUsersAreNeverRefused() throws {
        let harness = try harness()
        let lite = harness.connect(), newcomer = harness.connect(), veteran = harness.connect()
        harness.signIn(lite, as: "lee", claims: [("subscription", "lite")])
        harness.signIn(newcomer, as: "nina", claims: [("created_at", .number(Double(harness.clock.now - 60_000)))])
        harness.signIn(veteran, as: "vic", claims: [("created_at", .number(Double(harness.clock.now - 7_200_000)))])
        for _ in 0..<10 {
            #expect(refresh(harness, lite) == "ok")
            #expect(refresh(harness, newcomer) == "ok")
        }
        let s = try status(harness, lite)
        // Over the wire, as in the database, null members are absent (limit, remaining, cooldownSeconds).
        #expect(s == .object([
            ("canProceed", true), ("currentUsage", 0), ("location", "online-users"), ("remainingCooldown", 0), ("showPopup", false),
            ("tier", "lite"), ("unlimited", true),
        ]))
        #expect(try status(harness, newcomer)["tier"] == "new-user")
        #expect(try status(harness, veteran)["tier"] == "free")
        // The grace period of a new user ends by the clock: then the free tier applies.
        harness.advance(byMilliseconds: 7_200_000)
        #expect(try status(harness, newcomer)["tier"] == "free")
        #expect(refresh(harness, newcomer) == "ok")
        #expect(refresh(harness, newcomer) == "ok")
        #expect(refresh(harness, newcomer) != "ok")
        let outcomes = harness.engine.takeLimitEvents().filter { $0.uid == "lee" }.map(\.outcome)
        #expect(outcomes.filter { $0 == .bypassByTier }.count == 10)
    }

    @Test func aFailedRefreshConsumesNothing() throws {
        let harness = try harness()
        let anonymous = harness.connect()
        #expect(refresh(harness, anonymous) == #"{"t":"d","d":{"r":7,"b":{"s":"permission_denied","d":"Permission denied"}}}"#)
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        harness.request(9, "g", #"{"p":"/online-users","q":{"l":"not-a-number"}}"#, from: id)
        #expect(harness.take(id).last?.contains(#""s":"invalid_data""#) == true)
        #expect(harness.engine.limitUsage(LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "alice")) == nil)
        #expect(try status(harness, id)["remaining"] == 2)
    }

    @Test func twoDevicesOfOneUserShareTheLimit() throws {
        let harness = try harness()
        let phone = harness.connect(), laptop = harness.connect()
        harness.signIn(phone, as: "alice")
        harness.signIn(laptop, as: "alice")
        var permitted = 0
        for round in 0..<6 {
            if refresh(harness, round % 2 == 0 ? phone : laptop) == "ok" { permitted += 1 }
        }
        #expect(permitted == 2)
        #expect(try status(harness, laptop)["currentUsage"] == 2)
    }

    @Test func usageSurvivesARestartInTheMiddleOfACooldown() throws {
        let clock = ManualClock()
        let harness = EngineHarness(policy: Self.rules, clock: clock)
        harness.engine.setLimits(try Self.limits())
        harness.engine.enableJournal()
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        #expect(refresh(harness, id) == "ok")
        #expect(refresh(harness, id) == "ok")
        harness.advance(byMilliseconds: 30_000)
        var stored = StoredState()
        while let batch = harness.engine.takeJournal() { stored.apply(batch) }
        #expect(stored.limitUsage[LimitUsageKey(namespace: "test", limit: "refreshOnlineUsers", uid: "alice")]
                == LimitUsage(count: 2, cooldownStartedAt: clock.now - 30_000))

        // A new process (and a reinstalled client) with the stored state.
        let restarted = EngineHarness(policy: Self.rules, clock: clock)
        restarted.engine.setLimits(try Self.limits())
        restarted.engine.restore(stored, now: clock.now)
        let again = restarted.connect()
        restarted.signIn(again, as: "alice")
        #expect(refresh(restarted, again) == Self.refused("refreshOnlineUsers: limit of 2 uses reached; try again in 1:30"))
        restarted.advance(byMilliseconds: 89_999)
        #expect(refresh(restarted, again) != "ok")
        restarted.advance(byMilliseconds: 1)
        #expect(refresh(restarted, again) == "ok")
    }

    @Test func restReadsUseTheLimitAndInternalReadsDoNot() throws {
        let harness = try harness()
        let alice = Credentials.user(auth: ["uid": "alice", "token": ["sub": "alice"]], expiresAt: nil)
        let online = try Path("/online-users")
        for _ in 0..<3 { _ = harness.engine.read(online, namespace: "test", credentials: alice, now: harness.clock.now) }
        #expect(harness.engine.limitStatus("refreshOnlineUsers", namespace: "test", credentials: alice, now: harness.clock.now)?.currentUsage == 0)
        for _ in 0..<2 {
            #expect(throws: Never.self) {
                try harness.engine.read(online, namespace: "test", credentials: alice, now: harness.clock.now, countsAsUse: true).get()
            }
        }
        let third = harness.engine.read(online, namespace: "test", credentials: alice, now: harness.clock.now, countsAsUse: true)
        #expect(third == .failure(.rateLimited("refreshOnlineUsers: limit of 2 uses reached; try again in 2:00", retryAfterMilliseconds: 120_000)))
        // Operators are not limited.
        #expect(throws: Never.self) {
            try harness.engine.read(online, namespace: "test", credentials: .admin, now: harness.clock.now, countsAsUse: true).get()
        }
    }

    @Test func clockTextRoundsUp() {
        #expect(FeatureLimitResult.clock(milliseconds: 120_000) == "2:00")
        #expect(FeatureLimitResult.clock(milliseconds: 105_000) == "1:45")
        #expect(FeatureLimitResult.clock(milliseconds: 104_001) == "1:45")
        #expect(FeatureLimitResult.clock(milliseconds: 1) == "0:01")
        #expect(FeatureLimitResult.clock(milliseconds: 0) == "0:00")
        #expect(FeatureLimitResult.clock(milliseconds: 3_600_000) == "60:00")
    }
}

@Suite struct LimitsFileTests {
    func error(_ text: String) -> String? {
        do {
            _ = try LimitSet.load(text: text, source: "limits.json")
            return nil
        } catch {
            return error.description
        }
    }

    @Test func theShippedFileLoadsAndReproducesTheSeed() throws {
        let limits = try LimitSet.load(text: #require(TextFileForTests.read("rules/limits.json")), source: "rules/limits.json")
        let refresh = try #require(limits.limit(named: "refreshOnlineUsers"))
        #expect(refresh.location == (try Path("online-users")))
        #expect(refresh.tiers.map(\.name) == ["lite", "new-user", "free"])
        #expect(refresh.tiers.map(\.allowance) == [.unlimited, .unlimited, .limited(uses: 2, cooldownMilliseconds: 120_000)])
        #expect(limits.statusLocation == (try Path("feature-limits")))
    }

    @Test func invalidFilesAreRejectedWholeWithTheirPlace() {
        #expect(error("{") != nil)
        #expect(error(#"{"limits": {}, "extra": 1}"#) == #"limits.json: unknown key "extra" (allowed: limits, statusLocation)"#)
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": []}}}"#)
                == "limits.json: /limits/a/tiers: must be a non-empty array of tiers, tried in order")
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": "auth.uid ==", "limit": 1}]}}}"#)?
            .hasPrefix("limits.json: /limits/a/tiers/0/when: at position") == true)
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": "auth.uid", "limit": 1}]}}}"#)?
            .contains("must evaluate to a boolean") == true)
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": true, "limit": 1.5}]}}}"#)
                == "limits.json: /limits/a/tiers/0/limit: must be a whole number of uses from 0 to 1000000000")
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": true, "unlimited": true, "limit": 1}]}}}"#)?
            .contains("either \"unlimited\": true or has a \"limit\"") == true)
        #expect(error(#"{"limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": true, "limit": 1, "cooldownSeconds": 0}]}}}"#)?
            .contains("/cooldownSeconds") == true)
        #expect(error(#"{"limits": {"a": {"location": "x/y", "tiers": [{"name": "t", "when": true, "unlimited": true}]}, "b": {"location": "x", "tiers": [{"name": "t", "when": true, "unlimited": true}]}}}"#)
                == #"limits.json: /limits/b/location: overlaps the location of read limit "a" (/x/y)"#)
        #expect(error(#"{"statusLocation": "x", "limits": {"a": {"location": "x", "tiers": [{"name": "t", "when": true, "unlimited": true}]}}}"#)
                == "limits.json: /limits/a/location: overlaps the statusLocation /x")
        #expect(error(#"{"limits": {"a": {"location": "/", "tiers": [{"name": "t", "when": true, "unlimited": true}]}}}"#)
                == "limits.json: /limits/a/location: must not be the root")
    }

    @Test func tiersWithoutCooldownNeverComeBack() throws {
        let limits = try LimitSet.load(text: #"{"limits": {"trial": {"location": "reports", "tiers": [{"name": "all", "when": true, "limit": 1}]}}}"#,
                                       source: "t")
        let harness = EngineHarness()
        harness.engine.setLimits(limits)
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        harness.request(1, "g", #"{"p":"/reports","q":{}}"#, from: id)
        harness.request(2, "g", #"{"p":"/reports/2026","q":{}}"#, from: id)
        #expect(harness.take(id) == [
            #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":null}}}"#,
            #"{"t":"d","d":{"r":2,"b":{"s":"rate_limited","d":"trial: limit of 1 use reached"}}}"#,
        ])
        harness.advance(byMilliseconds: 365 * 86_400_000)
        harness.request(3, "g", #"{"p":"/reports","q":{}}"#, from: id)
        #expect(harness.take(id).last?.contains("rate_limited") == true)
        #expect(harness.engine.takeLimitEvents().map(\.outcome) == [.performed, .blockedByLimit, .blockedByLimit])
    }
}

/// Files of the repository (the shipped rules and limits), found from this source file's place.
enum TextFileForTests {
    static func read(_ relativePath: String, file: String = #filePath) -> String? {
        var root = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3).joined(separator: "/")
        if root.isEmpty { root = "." }
        return try? String(contentsOfFile: root + "/" + relativePath, encoding: .utf8)
    }
}

/// `"operation": "write"`: the seed's message limits, on writes instead of reads.
@Suite struct WriteLimitsTests {
    static let limits = try! LimitSet.load(text: """
        {"limits": {
          "sendMessage": {"location": "messages", "operation": "write", "tiers": [
            {"name": "free", "when": "auth != null", "limit": 3, "cooldownSeconds": 60}]},
          "readMessages": {"location": "messages", "tiers": [{"name": "all", "when": true, "unlimited": true}]}
        }}
        """, source: "limits.json")
    static let rules = try! RuleSet.load(
        text: #"{"rules": {"messages": {"$uid": {".read": true, ".write": "auth.uid == $uid"}}, "profile": {".write": true}}}"#,
        source: "test")

    func reply(_ harness: EngineHarness, _ id: ConnectionID, _ action: String, _ body: String) -> String {
        harness.request(5, action, body, from: id)
        return harness.take(id).last(where: { $0.contains(#""r":5"#) }) ?? ""
    }

    @Test func writesUseTheLimitAndARefusedWriteChangesNothing() throws {
        let harness = EngineHarness(policy: Self.rules)
        harness.engine.setLimits(Self.limits)
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        for n in 1...3 {
            #expect(reply(harness, id, "p", "{\"p\":\"/messages/alice/m\(n)\",\"d\":\"hi\"}").contains(#""s":"ok""#))
        }
        // A merge touching the limited location and another one counts as one use, and is refused whole.
        let refused = reply(harness, id, "m", #"{"p":"/","d":{"messages/alice/m4":"hi","profile/name":"Al"}}"#)
        #expect(refused == #"{"t":"d","d":{"r":5,"b":{"s":"rate_limited","d":"sendMessage: limit of 3 uses reached; try again in 1:00"}}}"#)
        #expect(harness.engine.value(at: try Path("/messages/alice/m4"), namespace: "test").isNull)
        #expect(harness.engine.value(at: try Path("/profile"), namespace: "test").isNull)
        // Writes elsewhere, and reads of the location (an unlimited read tier), are not affected.
        #expect(reply(harness, id, "p", #"{"p":"/profile/name","d":"Al"}"#).contains(#""s":"ok""#))
        #expect(reply(harness, id, "g", #"{"p":"/messages/alice","q":{}}"#).contains(#""s":"ok""#))
        // A write the rules refuse consumes nothing (and is refused for the rules, not the limit).
        harness.advance(byMilliseconds: 60_000)
        #expect(reply(harness, id, "p", #"{"p":"/messages/bob/x","d":"spoof"}"#).contains("permission_denied"))
        #expect(harness.engine.limitStatus("sendMessage", namespace: "test", credentials: .user(auth: ["uid": "alice"], expiresAt: nil),
                                           now: harness.clock.now)?.remaining == 3)
    }

    @Test func onDisconnectWritesAreNotCounted() throws {
        let harness = EngineHarness(policy: Self.rules)
        harness.engine.setLimits(Self.limits)
        let id = harness.connect()
        harness.signIn(id, as: "alice")
        for n in 1...3 { _ = reply(harness, id, "p", "{\"p\":\"/messages/alice/m\(n)\",\"d\":\"hi\"}") }
        #expect(reply(harness, id, "o", #"{"p":"/messages/alice/bye","d":"left"}"#).contains(#""s":"ok""#))
        harness.disconnect(id)
        #expect(harness.engine.value(at: try Path("/messages/alice/bye"), namespace: "test") == Node(.string("left")))
    }

    @Test func operationIsValidatedAndOverlapIsPerOperation() {
        #expect(throws: LimitsLoadError.self) {
            try LimitSet.load(text: #"{"limits": {"a": {"location": "x", "operation": "delete", "tiers": [{"name": "t", "when": true, "unlimited": true}]}}}"#,
                              source: "l")
        }
        #expect(throws: LimitsLoadError.self) {
            try LimitSet.load(text: #"{"limits": {"a": {"location": "x", "operation": "write", "tiers": [{"name": "t", "when": true, "unlimited": true}]}, "b": {"location": "x/y", "operation": "write", "tiers": [{"name": "t", "when": true, "unlimited": true}]}}}"#,
                              source: "l")
        }
        #expect(Self.limits.limits.map(\.operation) == [.write, .read])
    }
}

/// Issue 16: usage read back from storage is not trusted; no arithmetic on it may trap.
@Suite struct LimitArithmeticTests {
    @Test(arguments: [Int64.max, Int64.max - 1, Int64.min, 0])
    func cooldownArithmeticSaturatesOnAnInsaneStartTime(started: Int64) {
        var usage = LimitUsage(count: 5, cooldownStartedAt: started)
        let remaining = usage.remainingCooldown(at: 1_700_000_000_000, cooldown: 120_000)
        #expect(remaining >= 0)
        _ = usage.advance(to: 1_700_000_000_000, uses: 5, cooldown: 120_000)
        _ = usage.remainingCooldown(at: Int64.min, cooldown: 120_000)
    }

    /// Token claims used as numbers by limit conditions (`created_at`) are plain doubles in the
    /// rules language: any value, however large or of whatever type, evaluates without trapping.
    @Test(arguments: [
        (JSON.number(1.7e308), true), (.number(-1.7e308), false), (.number(1_700_000_000_000), true),
        (.string("soon"), false), (.bool(true), false), (.null, false), (.number(9.3e18), true),
    ])
    func claimArithmeticInConditionsNeverTraps(createdAt: JSON, expected: Bool) throws {
        let condition = try RuleCondition("now - auth.token.created_at < 7200000", file: "limits.json", location: "/when")
        let auth: JSON = .object([("uid", "alice"), ("token", .object([("created_at", createdAt)]))])
        #expect(condition.evaluate(auth: auth, root: .null, now: 1_700_000_000_000) == expected)
    }

    @Test(arguments: [(Int64.max, "153722867280912:56"), (0, "0:00"), (1, "0:01"), (-5, "0:00"), (61_001, "1:02")])
    func clockNeverOverflows(milliseconds: Int64, expected: String) {
        #expect(FeatureLimitResult.clock(milliseconds: milliseconds) == expected)
    }
}
