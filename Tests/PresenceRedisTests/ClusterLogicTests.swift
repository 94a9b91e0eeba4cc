import Testing
@testable import PresenceRedis

/// The cluster-side rules and formats, without a Redis: lease monitor, keys, log entries.
@Suite struct ClusterLogicTests {
    @Test func leaseMonitorFencesBeforeTheLeaseCanExpire() throws {
        #expect(throws: LeaseMonitor.Invalid.fenceNotBeforeLease(fenceAfter: 5000, lease: 5000)) {
            try LeaseMonitor(leaseMilliseconds: 5000, fenceAfterMilliseconds: 5000)
        }
        var monitor = try LeaseMonitor(leaseMilliseconds: 5000, fenceAfterMilliseconds: 3000)
        #expect(monitor.isFenced(at: 0), "no beat yet")
        monitor.beatSucceeded(sentAt: 1000)
        #expect(!monitor.isFenced(at: 3999))
        #expect(monitor.isFenced(at: 4000))
        #expect(monitor.fenceDeadline == 4000)
        // A late reply for an older beat does not move the deadline back.
        monitor.beatSucceeded(sentAt: 3500)
        monitor.beatSucceeded(sentAt: 2000)
        #expect(monitor.fenceDeadline == 6500)
        monitor.leaseLost()
        #expect(monitor.isFenced(at: 3600) && monitor.fenceDeadline == nil)
    }

    @Test func leaseMonitorReapsOnlyAfterALeaseAndASecondConnected() throws {
        var monitor = try LeaseMonitor(leaseMilliseconds: 5000, fenceAfterMilliseconds: 3000)
        monitor.connected(at: 10_000)
        monitor.beatSucceeded(sentAt: 15_500)
        #expect(!monitor.mayReap(at: 15_999))
        #expect(monitor.mayReap(at: 16_000))
        monitor.disconnected()
        #expect(!monitor.mayReap(at: 16_000))
        monitor.connected(at: 16_000)
        #expect(!monitor.mayReap(at: 18_000), "fresh connection")
        #expect(!monitor.mayReap(at: 22_000), "fenced: no beat since 15.5 s")
    }

    @Test func keysShareOneHashTagPerNamespace() throws {
        let keys = try RedisKeys(prefix: "p", namespace: "demo")
        for key in [keys.head, keys.log, keys.nodes, keys.down, keys.snapper, keys.session("S1"),
                    keys.owned(by: "a#1"), keys.snapshot(7)] {
            #expect(key.hasPrefix("p:{demo}:"))
        }
        #expect(throws: RedisKeys.Invalid.prefix("a{b")) { try RedisKeys(prefix: "a{b", namespace: "x") }
        #expect(throws: RedisKeys.Invalid.namespace("")) { try RedisKeys(namespace: "") }
        #expect(throws: NodeIdentity.Invalid.name("a#b")) { try NodeIdentity(name: "a#b") }
        let node = try NodeIdentity(name: "127.0.0.1:9001")
        #expect(node.id.hasPrefix("127.0.0.1:9001#") && node.incarnation.count == 12)
        #expect(try NodeIdentity(name: "a").incarnation != NodeIdentity(name: "a").incarnation)
    }

    @Test func logEntriesParseEveryKindAndRefuseMalformedOnes() {
        func entry(_ id: String, _ fields: [String]) -> RedisReply {
            .array([.bulk(Array(id.utf8)), .array(fields.map { .bulk(Array($0.utf8)) })])
        }
        #expect(RedisLogEntry(entry("7-0", ["k", "p", "n", "a#1", "t", "100", "e", "{}"]))
            == RedisLogEntry(rev: 7, node: "a#1", time: 100, body: .proposal(Array("{}".utf8))))
        #expect(RedisLogEntry(entry("8-0", ["k", "dead", "n", "a#1", "t", "5", "d", "b#2", "b", "4"]))?.body
            == .nodeDead(deadNode: "b#2", lastBeat: 4))
        #expect(RedisLogEntry(entry("9-0", ["k", "leave", "n", "a#1", "t", "5", "b", "3"]))?.body == .nodeLeft(at: 3))
        #expect(RedisLogEntry(entry("10-0", ["k", "takeover", "n", "a#1", "t", "5", "s", "S", "f", "b#2"]))?.body
            == .takeover(session: "S", from: "b#2"))
        #expect(RedisLogEntry(entry("11-0", ["k", "future", "n", "a#1", "t", "5"]))?.body == .unknown(kind: "future"))
        #expect(RedisLogEntry(entry("12-1", ["k", "p", "n", "a", "t", "1", "e", ""])) == nil, "not one of ours")
        #expect(RedisLogEntry(entry("13-0", ["k", "p", "n", "a", "t", "1"])) == nil, "no payload")
        #expect(RedisLogEntry(.null) == nil)
    }

    @Test func scriptsHaveDistinctNames() {
        let names = RedisScripts.all.map(\.name)
        #expect(Set(names).count == names.count && names.count == 12)
    }
}
