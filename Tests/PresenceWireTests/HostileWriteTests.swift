import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Issue 16: a transaction's hash must not be an oracle for data the caller may not read, and an
/// increment may never store a non-finite number.
@Suite struct HostileWriteTests {
    /// Alice's private node: only Alice may read or write it. Bob may write (not read) his drop box.
    static let rules = """
        {"rules": {"users": {"$uid": {
            "private": {".read": "auth.uid == $uid", ".write": "auth.uid == $uid"},
            "dropbox": {".write": "auth != null"},
            "presence": {".read": "auth != null", ".write": "auth.uid == $uid",
                         "lastSeen": {".validate": "newData.isNumber()"}}
        }}}}
        """

    func harness(limits: EngineLimits = .default) throws -> EngineHarness {
        // A stand-in digest (the bytes themselves): the engine's ordering, not SHA-1, is under test.
        EngineHarness(policy: try RuleSet.load(text: Self.rules, source: "test"), hashDigest: { $0 }, limits: limits)
    }

    func put(_ harness: EngineHarness, _ id: ConnectionID, _ r: Int, _ path: String, _ data: String, hash: String? = nil) -> [String] {
        let h = hash.map { #","h":"\#($0)""# } ?? ""
        harness.request(r, "p", #"{"p":"\#(path)","d":\#(data)\#(h)}"#, from: id)
        return harness.take(id)
    }

    func reply(_ r: Int, _ status: String, _ data: String) -> String {
        #"{"t":"d","d":{"r":\#(r),"b":{"s":"\#(status)","d":"\#(data)"}}}"#
    }

    @Test func transactionHashIsNoOracleForUnreadableData() throws {
        let harness = try harness()
        let alice = harness.connect(), bob = harness.connect()
        harness.signIn(alice, as: "alice")
        harness.signIn(bob, as: "bob")
        #expect(put(harness, alice, 1, "/users/alice/private", #""secret""#) == [reply(1, "ok", "")])
        let right = try #require(harness.engine.hash(Node(json: "secret")))
        let wrong = try #require(harness.engine.hash(Node(json: "guess")))
        // The same answer whether Bob's guess is right or wrong, and nothing is written.
        #expect(put(harness, bob, 2, "/users/alice/private", #""x""#, hash: right) == [reply(2, "permission_denied", "Permission denied")])
        #expect(put(harness, bob, 3, "/users/alice/private", #""x""#, hash: wrong) == [reply(3, "permission_denied", "Permission denied")])
        #expect(harness.engine.value(at: try Path("/users/alice/private"), namespace: "test") == Node(.string("secret")))
        // Alice, who may write, still gets datastale for a stale hash and ok for the current one.
        #expect(put(harness, alice, 4, "/users/alice/private", #""new""#, hash: wrong) == [reply(4, "datastale", "Transaction hash does not match")])
        #expect(put(harness, alice, 5, "/users/alice/private", #""new""#, hash: right) == [reply(5, "ok", "")])
    }

    func restHandler(_ harness: EngineHarness) -> RESTHandler { RESTHandler(engine: harness.engine, defaultNamespace: "test") }

    func restPut(_ handler: RESTHandler, _ path: String, as uid: String, body: String, headers: [String: String]) -> HTTPResponse {
        let request = HTTPRequest(method: "PUT", path: path, query: ["ns": "test", "auth": EngineHarness.unsignedToken(uid)],
                                  headers: headers, body: Array(body.utf8))
        return handler.handle(request, now: 1_700_000_000_000)
    }

    @Test func restIfMatchIsNoOracleAndNoETagLeaks() throws {
        let harness = try harness()
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        #expect(put(harness, alice, 1, "/users/alice/private", #""secret""#) == [reply(1, "ok", "")])
        let handler = restHandler(harness)
        let right = harness.engine.etag(try Node(json: "secret"))
        for tag in [right, "wrong", "null_etag"] {
            let response = restPut(handler, "/users/alice/private.json", as: "bob", body: #""x""#, headers: ["if-match": tag])
            #expect(response.status == 401, "if-match \(tag)")
            #expect(!response.headers.contains { $0.0 == "ETag" })
            #expect(!response.body.contains("secret"))
        }
        #expect(harness.engine.value(at: try Path("/users/alice/private"), namespace: "test") == Node(.string("secret")))
        // Alice may read: a stale ETag gets 412 with the current value and its ETag.
        let stale = restPut(handler, "/users/alice/private.json", as: "alice", body: #""x""#, headers: ["if-match": "wrong"])
        #expect(stale.status == 412 && stale.body == #""secret""# && stale.headers.contains { $0 == ("ETag", right) })
    }

    @Test func staleETagOnAValueOverTheReadBudgetGets412WithoutTheValue() throws {
        let harness = try harness(limits: EngineLimits(maxReadBytes: 64))
        let big = String(repeating: "s", count: 200)
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        #expect(put(harness, alice, 1, "/users/alice/private", #""\#(big)""#) == [reply(1, "ok", "")])
        let handler = restHandler(harness)
        // The 412 answer is a read: over --max-read-bytes it says the value changed, not what it is.
        let stale = restPut(handler, "/users/alice/private.json", as: "alice", body: #""x""#, headers: ["if-match": "wrong"])
        #expect(stale.status == 412 && !stale.body.contains(big) && !stale.headers.contains { $0.0 == "ETag" })
        #expect(harness.engine.value(at: try Path("/users/alice/private"), namespace: "test") == Node(.string(big)))
    }

    @Test func writeOnlyCallerNeverSeesAnETag() throws {
        let harness = try harness()
        let handler = restHandler(harness)
        let carol = harness.connect()
        harness.signIn(carol, as: "carol")
        #expect(put(harness, carol, 1, "/users/alice/dropbox", #"{"from":"carol","note":"hidden"}"#) == [reply(1, "ok", "")])
        // Bob may write Alice's drop box but not read it: neither a conditional write that fails
        // nor a successful write with X-Firebase-ETag returns the hash of what is there.
        let stale = restPut(handler, "/users/alice/dropbox.json", as: "bob", body: #"{"from":"bob"}"#, headers: ["if-match": "wrong"])
        #expect(stale.status == 412 && !stale.headers.contains { $0.0 == "ETag" } && !stale.body.contains("hidden"))
        let written = restPut(handler, "/users/alice/dropbox.json", as: "bob", body: #"{"from":"bob"}"#, headers: ["x-firebase-etag": "true"])
        #expect(written.status == 200 && !written.headers.contains { $0.0 == "ETag" })
    }

    @Test(arguments: [(-1.7e308, -1.7e308), (1.7e308, 1.7e308), (1.7976931348623157e308, 1e292)])
    func incrementThatOverflowsIsRefusedAndStoresNothing(stored: Double, delta: Double) throws {
        let harness = try harness()
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        let path = "/users/alice/presence/lastSeen"
        #expect(put(harness, alice, 1, path, "\(stored)") == [reply(1, "ok", "")])
        let increment = #"{".sv":{"increment":\#(delta)}}"#
        let refusal = "Invalid data at \(path): increment overflows: the result is beyond ±1.7976931348623157e308"
        #expect(put(harness, alice, 2, path, increment) == [reply(2, "invalid_data", refusal)])
        harness.request(3, "m", #"{"p":"/users/alice/presence","d":{"lastSeen":\#(increment)}}"#, from: alice)
        #expect(harness.take(alice) == [reply(3, "invalid_data", refusal)])
        harness.request(4, "o", #"{"p":"\#(path)","d":\#(increment)}"#, from: alice)
        #expect(harness.take(alice) == [reply(4, "invalid_data", refusal)])
        #expect(harness.engine.value(at: try Path(path), namespace: "test") == Node(.number(stored)))
    }

    @Test func onDisconnectIncrementThatOverflowsWhenItRunsStoresNothing() throws {
        let harness = try harness()
        let alice = harness.connect(), bob = harness.connect()
        harness.signIn(alice, as: "alice")
        let path = "/users/alice/presence/lastSeen"
        #expect(put(harness, alice, 1, path, "0") == [reply(1, "ok", "")])
        harness.request(2, "o", #"{"p":"\#(path)","d":{".sv":{"increment":-1.7e308}}}"#, from: alice)
        #expect(harness.take(alice) == [reply(2, "ok", "")])
        #expect(put(harness, alice, 3, path, "-1.7e308") == [reply(3, "ok", "")])
        harness.disconnect(alice)
        _ = bob
        #expect(harness.engine.value(at: try Path(path), namespace: "test") == Node(.number(-1.7e308)))
    }
}
