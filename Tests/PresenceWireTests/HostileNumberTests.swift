import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Issue 16: every number of every wire request is range-checked on the way in. One message with
/// a huge number used to stop the server (a trap converting a Double to an Int); now each answers
/// a clear `invalid_data` naming the field and its range, and the connection goes on.
@Suite struct HostileNumberTests {
    static let maxSafe = "9007199254740991"
    static let hostileNumbers = ["1e300", "-1e300", "9.3e18", "-9.3e18", "9007199254740992", "1.5", "-1"]

    /// Sends `message` on a fresh connection right after the hello (no credentials) and returns
    /// what came back; the connection is then still usable (a ping answers).
    func exchange(_ message: String, harness: EngineHarness = EngineHarness()) -> [String] {
        let id = harness.connect()
        _ = harness.take(id)
        harness.send(message, from: id)
        let replies = harness.take(id)
        harness.send(#"{"t":"c","d":{"t":"p","d":{}}}"#, from: id)
        #expect(harness.take(id) == [#"{"t":"c","d":{"t":"o","d":{}}}"#])
        return replies
    }

    func invalidData(_ r: Int, _ message: String) -> String {
        #"{"t":"d","d":{"r":\#(r),"b":{"s":"invalid_data","d":"\#(message)"}}}"#
    }

    @Test(arguments: ["q", "n"], hostileNumbers + ["0", #""1""#, "true", "{}"])
    func tagOutOfRangeIsAnErrorReply(action: String, tag: String) {
        let replies = exchange(#"{"t":"d","d":{"r":1,"a":"\#(action)","b":{"p":"/x","h":"","q":{"l":1},"t":\#(tag)}}}"#)
        #expect(replies == [invalidData(1, "tag t must be an integer from 1 to \(Self.maxSafe)")])
    }

    @Test func largestTagIsAccepted() {
        let replies = exchange(#"{"t":"d","d":{"r":1,"a":"q","b":{"p":"/x","h":"","q":{"l":1},"t":\#(Self.maxSafe)}}}"#)
        #expect(replies == [
            #"{"t":"d","d":{"a":"d","b":{"p":"x","d":null,"t":\#(Self.maxSafe)}}}"#,
            #"{"t":"d","d":{"r":1,"b":{"s":"ok","d":{}}}}"#,
        ])
    }

    /// A request number that cannot be answered by number refuses the request with a control error.
    @Test(arguments: hostileNumbers + [#""1""#, "true", "[1]", "-1e400", "1e400"])
    func requestNumberOutOfRangeRefusesTheRequest(r: String) {
        let harness = EngineHarness()
        let replies = exchange(#"{"t":"d","d":{"r":\#(r),"a":"p","b":{"p":"/x","d":1}}}"#, harness: harness)
        #expect(replies.count == 1)
        #expect(replies.first?.hasPrefix(#"{"t":"c","d":{"t":"e","d":""#) == true)
        if r.contains("e400") {
            #expect(replies.first?.contains("number out of range") == true)
        } else {
            #expect(replies.first?.contains("request number r must be an integer from 0 to \(Self.maxSafe)") == true)
        }
        #expect(harness.engine.value(at: try! Path("/x"), namespace: "test").isNull)
    }

    @Test(arguments: ["0", maxSafe])
    func requestNumbersAtTheEndsOfTheRangeAreAnswered(r: String) {
        let replies = exchange(#"{"t":"d","d":{"r":\#(r),"a":"p","b":{"p":"/x","d":1}}}"#)
        #expect(replies == [#"{"t":"d","d":{"r":\#(r),"b":{"s":"ok","d":""}}}"#])
    }

    @Test(arguments: ["q", "g"], hostileNumbers + ["0", "-1e300", #""3""#])
    func queryLimitOutOfRangeIsAnErrorReply(action: String, limit: String) {
        let replies = exchange(#"{"t":"d","d":{"r":2,"a":"\#(action)","b":{"p":"/x","h":"","t":1,"q":{"l":\#(limit)}}}}"#)
        #expect(replies == [invalidData(2, "l must be a positive integer (1 to \(Self.maxSafe))")])
    }

    /// Bound values are any finite double; the extremes are ordinary values, not errors.
    @Test(arguments: ["1.7976931348623157e308", "-1.7976931348623157e308", "9.3e18", "5e-324"])
    func extremeBoundValuesAreAnswered(value: String) {
        let replies = exchange(#"{"t":"d","d":{"r":3,"a":"g","b":{"p":"/x","q":{"sp":\#(value),"ep":\#(value),"i":".value"}}}}"#)
        #expect(replies == [#"{"t":"d","d":{"r":3,"b":{"s":"ok","d":null}}}"#])
    }

    @Test(arguments: [#"{"sp":1e400}"#, #"{"ep":-1e999}"#, #"{"l":1e400}"#])
    func overflowingQueryNumbersAreAnErrorReply(query: String) {
        let replies = exchange(#"{"t":"d","d":{"r":4,"a":"g","b":{"p":"/x","q":\#(query)}}}"#)
        #expect(replies.count == 1)
        #expect(replies.first?.hasPrefix(#"{"t":"d","d":{"r":4,"b":{"s":"invalid_data","d":"number out of range at \"b/q/"#) == true)
    }

    @Test func queryKeyNameLongerThanAKeyIsAnErrorReply() {
        let name = String(repeating: "n", count: 769)
        let replies = exchange(#"{"t":"d","d":{"r":5,"a":"g","b":{"p":"/x","q":{"sp":1,"sn":"\#(name)"}}}}"#)
        #expect(replies == [invalidData(5, "sn must be at most 768 bytes")])
    }

    @Test(arguments: ["5", "true", "{}", "[]", "null"])
    func transactionHashMustBeAString(hash: String) {
        let harness = EngineHarness()
        let replies = exchange(#"{"t":"d","d":{"r":6,"a":"p","b":{"p":"/x","d":1,"h":\#(hash)}}}"#, harness: harness)
        #expect(replies == [invalidData(6, "hash h must be a string")])
        // Not silently turned into a plain write.
        #expect(harness.engine.value(at: try! Path("/x"), namespace: "test").isNull)
    }

    @Test(arguments: ["1e400", "-1e400", "1E+99999"])
    func overflowingDataIsAnErrorReplyAndNothingIsStored(number: String) {
        let harness = EngineHarness()
        let replies = exchange(#"{"t":"d","d":{"r":7,"a":"p","b":{"p":"/x","d":{"a":[0,\#(number)]}}}}"#, harness: harness)
        #expect(replies == [invalidData(7, #"number out of range at \"b/d/a/1\": numbers must lie within ±1.7976931348623157e308"#)])
        #expect(harness.engine.value(at: try! Path("/x"), namespace: "test").isNull)
    }

    @Test(arguments: ["1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "9.3e18"])
    func extremeFiniteDataAndPrioritiesAreStored(number: String) throws {
        let harness = EngineHarness()
        let replies = exchange(#"{"t":"d","d":{"r":8,"a":"p","b":{"p":"/x","d":{".value":\#(number),".priority":\#(number)}}}}"#, harness: harness)
        #expect(replies == [#"{"t":"d","d":{"r":8,"b":{"s":"ok","d":""}}}"#])
        let stored = harness.engine.value(at: try Path("/x"), namespace: "test")
        #expect(stored.leafValue == .number(try #require(Double(number))))
    }

    /// Emulator tokens carry any claims: numbers of any size are passed to the rules as they
    /// are and never converted to a time that could trap.
    @Test(arguments: ["1e300", "-1e300", "9.3e18", "1.5"])
    func emulatorTokenClaimsOfAnySizeAreAccepted(number: String) throws {
        let claims = try JSONParser.parse(#"{"exp":\#(number),"iat":\#(number),"auth_time":\#(number),"created_at":\#(number)}"#)
        let token = EngineHarness.unsignedToken("alice", claims: claims.objectMembers ?? [])
        let replies = exchange(#"{"t":"d","d":{"r":9,"a":"auth","b":{"cred":"\#(token)"}}}"#)
        #expect(replies.count == 1)
        #expect(replies.first?.hasPrefix(#"{"t":"d","d":{"r":9,"b":{"s":"ok","d":{"auth":{"uid":"alice""#) == true)
    }

    // MARK: REST

    func restGet(_ query: [String: String]) -> HTTPResponse {
        let handler = RESTHandler(engine: EngineHarness().engine, defaultNamespace: "test")
        return handler.handle(HTTPRequest(method: "GET", path: "/x.json", query: ["ns": "test"].merging(query) { a, _ in a }),
                              now: 1_700_000_000_000)
    }

    @Test(arguments: ["limitToFirst", "limitToLast"], hostileNumbers + ["0", "1e400", "NaN", "Infinity", ""])
    func restLimitOutOfRangeIs400(parameter: String, value: String) {
        let response = restGet(["orderBy": #""$key""#, parameter: value])
        #expect(response.status == 400)
        #expect(response.body == #"{"error":"\#(parameter) must be a positive integer (1 to \#(Self.maxSafe))"}"#)
    }

    @Test(arguments: ["startAt", "endAt", "equalTo", "startAfter", "endBefore"], ["1e400", "-1e400", "1e400,\"a\""])
    func restBoundOutOfRangeIs400(parameter: String, value: String) {
        let response = restGet(["orderBy": #""$value""#, parameter: value])
        #expect(response.status == 400)
        #expect(response.body.contains("\(parameter) must be a JSON string, number, boolean or null"))
    }

    @Test(arguments: ["1e300s", "0ms", "16min", "900001ms", "-1s", "3", "s", "3 s", "99999999999999999999min", "3sec"])
    func restTimeoutOutOfRangeIs400(value: String) {
        let response = restGet(["timeout": value])
        #expect(response.status == 400)
        #expect(response.body.contains("timeout must be a whole number of ms, s or min from 1ms to 15min"))
    }

    @Test(arguments: ["1ms", "3s", "15min", "900000ms"])
    func restTimeoutWithinRangeIsAccepted(value: String) {
        #expect(restGet(["timeout": value]) == .json(200, "null"))
    }
}

/// Found by fuzzing the token target: a legacy token (`d` claim, no `sub`) whose `d` has no uid
/// was accepted as a signed-in user with no uid, which passes `auth != null`.
@Suite struct LegacyTokenTests {
    @Test(arguments: [#"{"uOd":"legacy"}"#, #"{"uid":""}"#, #"{"uid":5}"#, "{}"])
    func legacyTokenWithoutAUidIsRefused(d: String) throws {
        let claims = try JSONParser.parse(#"{"d":\#(d)}"#)
        let header = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))
        let credential = header + "." + Base64URL.encode(Array(JSONWriter.string(claims).utf8)) + "."
        #expect(EmulatorTokenVerifier().verify(credential, now: 0) == .failure(.invalidToken("Could not parse auth token: the d claim has no uid")))
    }

    @Test func legacyTokenWithAUidIsAccepted() throws {
        let header = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))
        let credential = header + "." + Base64URL.encode(Array(#"{"d":{"uid":"legacy","admin":true}}"#.utf8)) + "."
        let credentials = try EmulatorTokenVerifier().verify(credential, now: 0).get()
        #expect(credentials.uid == "legacy")
    }
}
