import Testing
import PresenceCore

/// `RuleSet.mightAllowWrite`: the check a REST write gets from its head, before its body. It may
/// only refuse what the full check would refuse whatever the value.
@Suite("Rules write precheck")
struct WritePrecheckTests {
    static let presence = #"""
        {"rules": {"users": {"$userId": {"presence": {
            ".write": "auth != null && auth.uid == $userId",
            "online": {".validate": "newData.isBoolean()"}}}},
          "inbox": {"$userId": {".write": "newData.child('from').val() == auth.uid"}},
          "locked": {".write": "data.exists() == false"},
          "deep": {"a": {"b": {".write": true}}}}}
        """#

    func might(_ path: String, auth uid: String?, below: Bool = false, root: JSON = nil) throws -> Bool {
        let rules = try RuleSet.load(text: Self.presence, source: "test")
        let auth: JSON? = uid.map { ["uid": .string($0)] }
        return rules.mightAllowWrite(at: try Path(path), below: below, root: try Node(json: root), auth: auth, now: 0)
    }

    @Test func aRuleThatIgnoresTheValueIsDecidedFromTheHead() throws {
        #expect(try !might("/users/alice/presence", auth: nil))
        #expect(try !might("/users/alice/presence", auth: "bob"))
        #expect(try might("/users/alice/presence", auth: "alice"))
        #expect(try might("/users/alice/presence/online", auth: "alice"))
        #expect(try might("/users/alice/presence/.priority", auth: "alice"))
        #expect(try !might("/elsewhere", auth: "alice"))
        // Old data counts as it will: a location that exists is locked.
        #expect(try might("/locked", auth: nil))
        #expect(try !might("/locked", auth: nil, root: ["locked": 1]))
    }

    @Test func aRuleThatReadsTheValueIsLeftToTheFullCheck() throws {
        #expect(try might("/inbox/alice", auth: nil))
        #expect(try might("/inbox/alice/from", auth: "bob"))
    }

    @Test func aWriteThatMayReachBelowCountsTheRulesBelow() throws {
        #expect(try !might("/deep", auth: nil))
        #expect(try might("/deep", auth: nil, below: true))
        #expect(try might("/users", auth: nil, below: true))
        #expect(try !might("/locked", auth: nil, below: true, root: ["locked": 1]))
    }

    /// Sound on every write vector of the conformance fixture: whenever the precheck refuses, the
    /// full check refuses too.
    @Test(arguments: RulesFixtures.runtime.filter { ["set", "update"].contains($0.json["op"]?.stringValue ?? "") })
    func neverRefusesWhatTheFullCheckAllows(_ vector: RulesVector) throws {
        let v = vector.json
        let rules = try RuleSet.load(text: JSONWriter.string(v["rules"] ?? .null), source: "vector")
        let root = try Node(json: v["root"] ?? .null)
        let auth = v["auth"].flatMap { $0.isNull ? nil : $0 }
        let now = Int64(v["now"]?.numberValue ?? 0)
        let path = try Path(v["path"]?.stringValue ?? "/")
        let might = rules.mightAllowWrite(at: path, below: v["op"]?.stringValue == "update", root: root, auth: auth, now: now)
        if !might {
            #expect(try !RulesHarness.run(v).allowed, "the precheck refused a write the rules allow")
        }
    }
}
