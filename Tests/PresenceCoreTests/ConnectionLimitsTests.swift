import PresenceTesting
import Testing
@testable import PresenceCore

/// Per-connection limits: over one, the request gets `too_big` naming the limit and its flag, the
/// first refusal is logged, and nothing else on the connection or the server is disturbed.
@Suite struct ConnectionLimitsTests {
    func status(_ message: String?) -> String? {
        guard let message, let range = message.range(of: #""s":""#) else { return nil }
        return String(message[range.upperBound...].prefix { $0 != "\"" })
    }

    @Test func listensPastTheLimitAreRefusedAndReplacingOneIsNot() {
        let harness = EngineHarness(limits: EngineLimits(maxListensPerConnection: 3))
        let id = harness.connect()
        let other = harness.connect()
        for index in 0..<3 { harness.request(index, "q", "{\"p\":\"/a/\(index)\",\"h\":\"\"}", from: id) }
        _ = harness.take(id)
        harness.request(10, "q", #"{"p":"/a/3","h":""}"#, from: id)
        let refused = harness.take(id)
        #expect(refused.count == 1 && status(refused.first) == "too_big")
        #expect(refused.first?.contains("--max-listens-per-connection") == true)
        #expect(harness.engine.takeNotices().count == 1)
        // The same listen again replaces it; a second refusal is not logged again.
        harness.request(11, "q", #"{"p":"/a/1","h":""}"#, from: id)
        #expect(status(harness.take(id).last) == "ok")
        harness.request(12, "q", #"{"p":"/a/4","h":""}"#, from: id)
        #expect(status(harness.take(id).last) == "too_big")
        #expect(harness.engine.takeNotices().isEmpty)
        // Unlistening frees a place; the listens kept still get their pushes; others are not limited.
        harness.request(13, "n", #"{"p":"/a/0"}"#, from: id)
        harness.request(14, "q", #"{"p":"/a/4","h":""}"#, from: id)
        #expect(status(harness.take(id).last) == "ok")
        harness.request(1, "p", #"{"p":"/a/2","d":7}"#, from: other)
        #expect(harness.take(id) == [#"{"t":"d","d":{"a":"d","b":{"p":"a/2","d":7}}}"#])
        for index in 0..<5 { harness.request(index, "q", "{\"p\":\"/b/\(index)\",\"h\":\"\"}", from: other) }
        #expect(harness.take(other).filter { status($0) == "too_big" }.count == 2)
    }

    @Test func onDisconnectOpsPastTheCountOrByteLimitAreRefused() throws {
        let harness = EngineHarness(limits: EngineLimits(maxOnDisconnectOps: 3, maxOnDisconnectBytes: 200))
        let id = harness.connect()
        for index in 0..<3 { harness.request(index, "o", "{\"p\":\"/s/\(index)\",\"d\":\"x\"}", from: id) }
        #expect(harness.take(id).allSatisfy { status($0) == "ok" || !$0.contains(#""r":"#) })
        harness.request(5, "o", #"{"p":"/s/3","d":"x"}"#, from: id)
        let refused = try #require(harness.take(id).last)
        #expect(status(refused) == "too_big" && refused.contains("--max-ondisconnect-ops"))
        // Re-registering a path it holds, or a set that replaces several, is not more ops.
        harness.request(6, "o", #"{"p":"/s/2","d":"y"}"#, from: id)
        #expect(status(harness.take(id).last) == "ok")
        harness.request(7, "o", #"{"p":"/s","d":{"all":"gone"}}"#, from: id)
        #expect(status(harness.take(id).last) == "ok")
        // Bytes: one value too large for what is left.
        let big = String(repeating: "z", count: 300)
        harness.request(8, "o", "{\"p\":\"/t\",\"d\":\"\(big)\"}", from: id)
        let tooBig = try #require(harness.take(id).last)
        #expect(status(tooBig) == "too_big" && tooBig.contains("--max-ondisconnect-bytes"))
        #expect(harness.engine.takeNotices().count == 2, "one line per limit met")
        // The ops kept run at disconnect as registered.
        harness.disconnect(id)
        #expect(harness.engine.value(at: try Path("/s/all"), namespace: "test") == Node(.string("gone")))
        #expect(harness.engine.value(at: try Path("/t"), namespace: "test") == .null)
    }

    /// A cancel frees places, and byte accounting follows sets, replacements and splits.
    @Test func cancelsFreeTheirPlaceAndBytes() throws {
        let harness = EngineHarness(limits: EngineLimits(maxOnDisconnectOps: 4, maxOnDisconnectBytes: 120))
        let id = harness.connect()
        harness.request(1, "o", #"{"p":"/u","d":{"a":"1234567890","b":"1234567890","c":"1234567890"}}"#, from: id)
        harness.request(2, "oc", #"{"p":"/u/a"}"#, from: id)  // splits /u into /u/b and /u/c
        harness.request(3, "oc", #"{"p":"/u/b"}"#, from: id)
        _ = harness.take(id)
        // One op of ~14 bytes left: room for 3 more ops of ~36 bytes, not a fourth.
        for index in 0..<3 { harness.request(10 + index, "o", "{\"p\":\"/v/\(index)\",\"d\":\"\(String(repeating: "q", count: 30))\"}", from: id) }
        #expect(harness.take(id).filter { $0.contains(#""r":1"#) }.allSatisfy { status($0) == "ok" })
        harness.request(20, "o", #"{"p":"/v/9","d":1}"#, from: id)
        #expect(status(harness.take(id).last) == "too_big")
        let snapshot = try #require(harness.engine.connectionSnapshots().first)
        #expect(snapshot.onDisconnectOps == 4)
    }
}
