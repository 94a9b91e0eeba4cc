import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Issue 16: a transaction (`p` with `h`), a REST `if-match` write and an ETag hash the whole value
/// at their location at once, in the loop; past `--max-hash-bytes` they are refused with `too_big`
/// (REST 413) before anything is hashed, and within it they work as before.
@Suite struct HashBudgetTests {
    static let rules = #"{"rules": {".read": "auth != null", ".write": "auth != null"}}"#
    static let budget = 2_000

    func harness() throws -> EngineHarness {
        EngineHarness(policy: try RuleSet.load(text: Self.rules, source: "test"), hashDigest: { Array($0.prefix(20)) },
                      limits: EngineLimits(maxHashBytes: Self.budget))
    }

    /// A location of `count` children of about 30 bytes each as JSON.
    func fill(_ harness: EngineHarness, _ id: ConnectionID, _ r: Int, _ path: String, count: Int) -> [String] {
        let members = (0..<count).map { #""k\#($0)":"value \#($0) of the list""# }.joined(separator: ",")
        harness.request(r, "p", #"{"p":"\#(path)","d":{\#(members)}}"#, from: id)
        return harness.take(id)
    }

    func request(_ handler: RESTHandler, _ method: String, _ path: String, body: String = "", headers: [String: String]) -> HTTPResponse {
        handler.handle(HTTPRequest(method: method, path: path, query: ["ns": "test", "auth": EngineHarness.unsignedToken("alice")],
                                   headers: headers, body: Array(body.utf8)), now: 1_700_000_000_000)
    }

    func status(_ line: String) -> String? {
        guard let range = line.range(of: #""s":""#) else { return nil }
        return String(line[range.upperBound...].prefix { $0 != "\"" })
    }

    @Test func aTransactionOverTheBudgetIsRefusedAndWritesNothing() throws {
        let harness = try harness()
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        #expect(fill(harness, alice, 1, "/big", count: 200).map(status) == ["ok"])
        #expect(fill(harness, alice, 2, "/small", count: 5).map(status) == ["ok"])
        let big = harness.engine.value(at: try Path("/big"), namespace: "test")
        // Whatever the hash given (even the right one), the whole of /big is not hashed.
        for (r, hash) in [(3, "guess"), (4, try #require(harness.engine.hash(big)))] {
            harness.request(r, "p", #"{"p":"/big","d":"replaced","h":"\#(hash)"}"#, from: alice)
            let replies = harness.take(alice)
            #expect(replies.map(status) == ["too_big"])
            #expect(replies.first?.contains("--max-hash-bytes") == true)
        }
        let after = harness.engine.value(at: try Path("/big"), namespace: "test")
        #expect(after == big)
        // Within the budget a transaction works as before: stale, then current.
        let small = harness.engine.value(at: try Path("/small"), namespace: "test")
        harness.request(5, "p", #"{"p":"/small","d":"replaced","h":"guess"}"#, from: alice)
        #expect(harness.take(alice).map(status) == ["datastale"])
        harness.request(6, "p", #"{"p":"/small","d":"replaced","h":"\#(try #require(harness.engine.hash(small)))"}"#, from: alice)
        #expect(harness.take(alice).map(status) == ["ok"])
        // The refusal is logged once for the connection.
        #expect(harness.engine.takeNotices().filter { $0.contains("--max-hash-bytes") }.count == 1)
    }

    @Test func restETagsOverTheBudgetAre413AndWithinItUnchanged() throws {
        let harness = try harness()
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        #expect(fill(harness, alice, 1, "/big", count: 200).map(status) == ["ok"])
        #expect(fill(harness, alice, 2, "/small", count: 5).map(status) == ["ok"])
        let handler = RESTHandler(engine: harness.engine, defaultNamespace: "test")
        // A read asking for the ETag, or matching one, and a conditional write: 413, saying why.
        for (method, headers) in [("GET", ["x-firebase-etag": "true"]), ("GET", ["if-none-match": "anything"]), ("PUT", ["if-match": "anything"])] {
            let response = request(handler, method, "/big.json", body: #""replaced""#, headers: headers)
            #expect(response.status == 413, "\(method) \(headers)")
            #expect(response.body.contains("--max-hash-bytes"))
            #expect(!response.headers.contains { $0.0 == "ETag" })
        }
        let stillThere = harness.engine.value(at: try Path("/big"), namespace: "test")
        #expect(stillThere != Node(.string("replaced")))
        // A plain read of /big is only a read (within --max-read-bytes): answered.
        #expect(request(handler, "GET", "/big.json", headers: [:]).status == 200)
        // A write there that asks for the ETag is made, and answered without one.
        let written = request(handler, "PUT", "/big/k0.json", body: #""changed""#, headers: [:])
        #expect(written.status == 200)
        let unconditional = request(handler, "PATCH", "/big.json", body: #"{"k1":"changed"}"#, headers: ["x-firebase-etag": "true"])
        #expect(unconditional.status == 200 && !unconditional.headers.contains { $0.0 == "ETag" })
        // Within the budget: the ETag, 304 for a match, 412 then 200 for if-match.
        let read = request(handler, "GET", "/small.json", headers: ["x-firebase-etag": "true"])
        let tag = try #require(read.headers.first { $0.0 == "ETag" }?.1)
        let small = harness.engine.value(at: try Path("/small"), namespace: "test")
        #expect(read.status == 200 && tag == harness.engine.etag(small))
        #expect(request(handler, "GET", "/small.json", headers: ["if-none-match": tag]).status == 304)
        #expect(request(handler, "PUT", "/small.json", body: #""x""#, headers: ["if-match": "stale"]).status == 412)
        #expect(request(handler, "PUT", "/small.json", body: #""x""#, headers: ["if-match": tag]).status == 200)
    }

    /// An ETag read again, a transaction retried: the location is hashed once while nobody writes
    /// there, and after a write the hash is the new value's (a retry against a kept hash of the
    /// old value would let a stale transaction through).
    @Test func aLocationIsHashedOnceUntilItIsWritten() throws {
        let harness = try harness()
        let alice = harness.connect()
        harness.signIn(alice, as: "alice")
        #expect(fill(harness, alice, 1, "/small", count: 5).map(status) == ["ok"])
        let handler = RESTHandler(engine: harness.engine, defaultNamespace: "test")
        let etag = { (response: HTTPResponse) in response.headers.first { $0.0 == "ETag" }?.1 }
        let first = try #require(etag(request(handler, "GET", "/small.json", headers: ["x-firebase-etag": "true"])))
        for _ in 0..<3 {
            #expect(etag(request(handler, "GET", "/small.json", headers: ["x-firebase-etag": "true"])) == first)
            #expect(request(handler, "PUT", "/small.json", body: #""x""#, headers: ["if-match": "stale"]).status == 412)
            harness.request(9, "p", #"{"p":"/small","d":"replaced","h":"stale"}"#, from: alice)
            #expect(harness.take(alice).map(status) == ["datastale"])
        }
        // One hash computed; the 412s' ETags and the transactions' checks were answered from it.
        #expect(harness.engine.hashCacheCounts.misses == 1)
        #expect(harness.engine.hashCacheCounts.hits >= 9)
        // A write below the location (its first child: the test digest reads 20 bytes): the old ETag
        // no longer matches, the new one is the value's.
        harness.request(10, "p", #"{"p":"/small/k0","d":"other"}"#, from: alice)
        #expect(harness.take(alice).map(status) == ["ok"])
        #expect(request(handler, "PUT", "/small.json", body: #""x""#, headers: ["if-match": first]).status == 412)
        let current = harness.engine.value(at: try Path("/small"), namespace: "test")
        let second = try #require(etag(request(handler, "GET", "/small.json", headers: ["x-firebase-etag": "true"])))
        #expect(second != first && second == harness.engine.etag(current))
        harness.request(11, "p", #"{"p":"/small","d":"replaced","h":"\#(try #require(harness.engine.hash(current)))"}"#, from: alice)
        #expect(harness.take(alice).map(status) == ["ok"])
    }
}
