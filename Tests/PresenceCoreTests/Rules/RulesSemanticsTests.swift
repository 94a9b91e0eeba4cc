import Testing
import PresenceCore

/// Focused checks of the evaluation semantics (spec §2–§5). The `readRule` and `set` helpers also
/// check that each decision's read set is sound (`ReadSetHarness`).
@Suite("Rules semantics")
struct RulesSemanticsTests {
    static let alice: JSON = ["uid": "alice", "provider": "password", "token": ["sub": "alice"]]

    func rules(_ text: String) throws -> RuleSet { try RuleSet.load(text: text, source: "test.json") }

    func tree(_ json: JSON) throws -> Node { try Node(json: json) }

    func readRule(_ expression: String, root: JSON = nil, auth: JSON? = nil) throws -> Bool {
        let escaped = JSONWriter.string(.string(expression))
        let set = try rules(#"{"rules":{".read":"# + escaped + "}}")
        ReadSetHarness.check(DecisionCase(name: expression, rules: set, root: try tree(root), auth: auth, now: 1000,
                                          operation: .read(.root, nil)), seeds: 0..<20)
        return set.canRead(.root, root: try tree(root), auth: auth, now: 1000).allowed
    }

    func set(_ set: RuleSet, _ path: String, _ value: JSON, root: JSON = nil, auth: JSON? = nil) throws -> RuleDecision {
        let target = try Path(path)
        let writes = [(target, try Node(json: value, at: target))]
        ReadSetHarness.check(DecisionCase(name: "set \(path)", rules: set, root: try tree(root), auth: auth, now: 1000,
                                          operation: .write(writes)), seeds: 0..<20)
        return set.canWrite(writes, root: try tree(root), auth: auth, now: 1000)
    }

    @Test func precedence() throws {
        #expect(try readRule("1 + 2 * 3 == 7"))
        #expect(try readRule("(1 + 2) * 3 == 9"))
        #expect(try readRule("10 - 4 - 3 == 3"))
        #expect(try readRule("12 / 3 / 2 == 2"))
        #expect(try readRule("7 % 4 * 2 == 6"))
        #expect(try readRule("true || false && false"))
        #expect(try !readRule("(true || false) && false"))
        #expect(try readRule("1 < 2 == true"))
        #expect(try readRule("!false && true"))
        #expect(try readRule("-2 * -3 == 6"))
        #expect(try readRule("false ? false : true ? true : false"))
        #expect(try readRule("true ? 1 + 1 == 2 : false"))
        #expect(try readRule("'a' + 1 + 2 == 'a12'"))
        #expect(try readRule("1 + 2 + 'a' == '3a'"))
    }

    @Test func javascriptNumberFormatting() throws {
        #expect(try readRule("1.0 + '' == '1'"))
        #expect(try readRule("1.5 + '' == '1.5'"))
        #expect(try readRule("0.1 + 0.2 + '' == '0.30000000000000004'"))
        #expect(try readRule("1e21 + '' == '1e+21'"))
        #expect(try readRule("0.0000001 + '' == '1e-7'"))
        #expect(try readRule("-5 + '' == '-5'"))
        #expect(try readRule("(1/0 + '') == 'NaN'"))
        #expect(try readRule("123456789012 + '' == '123456789012'"))
    }

    @Test func stringMembers() throws {
        #expect(try readRule("'héllo'.length == 5"))
        #expect(try readRule("'😀'.length == 2"))
        #expect(try readRule("'a_b_c'.replace('_', '-') == 'a-b-c'"))
        #expect(try readRule("'Hello'.toLowerCase() == 'hello' && 'Hello'.toUpperCase() == 'HELLO'"))
        #expect(try readRule("'foobar'.beginsWith('foo') && 'foobar'.endsWith('bar') && 'foobar'.contains('oba')"))
        #expect(try readRule("'ba'.matches(/a/)"))
        #expect(try !readRule("'ba'.matches(/^a/)"))
        #expect(try readRule("'2024-01-31'.matches(/^\\d{4}-\\d{2}-\\d{2}$/)"))
        #expect(try readRule("'ABC'.matches(/^[a-c]+$/i)"))
        #expect(try readRule("'{foo}'.matches(/\\{foo}/)"))
        #expect(try readRule("'b' < 'c' && 'B' < 'b'"))
    }

    @Test func runtimeErrorMakesTheRuleFalse() throws {
        // auth is null: `'users/' + auth.uid` is an error, which poisons `|| true`, `!` and `?:`.
        #expect(try !readRule("root.child('users/' + auth.uid).exists() || true"))
        #expect(try !readRule("!(auth.dreams.length > 1)"))
        #expect(try !readRule("auth.dreams.length > 1 ? false : true"))
        #expect(try !readRule("root.parent().exists() || true"))
        // Short-circuit avoids the error.
        #expect(try readRule("true || root.child('users/' + auth.uid).exists()"))
        #expect(try readRule("auth == null || root.child('users/' + auth.uid).exists()"))
        // Member access on null is not an error.
        #expect(try readRule("auth.uid !== 'eviluser'"))
        #expect(try readRule("auth.a.b.c == null"))
        // Ordering with null or mixed types is an error; == with mixed types is just false.
        #expect(try !readRule("auth.x < 1 || true"))
        #expect(try readRule("'one' != 1"))
        // A write whose grant errors is denied; a validate that errors fails the write.
        let set = try rules(#"{"rules":{".write":"root.child(auth.uid).exists() || true"}}"#)
        #expect(try !self.set(set, "/a", 1).allowed)
        let validate = try rules(#"{"rules":{".write":true,".validate":"newData.child('a').val().length > 0 || true"}}"#)
        #expect(try !self.set(validate, "/a", 5).allowed)
        #expect(try self.set(validate, "/a", "x").allowed)
    }

    @Test func cascadeCannotBeRevoked() throws {
        let set = try rules(#"""
        {"rules": {".read": "auth != null", ".write": "auth.uid == 'admin'",
                   "public": {".read": true, "secret": {".read": false}},
                   "locked": {".write": false}}}
        """#)
        let root = try tree(["public": ["secret": 1]])
        // A shallower grant cannot be revoked deeper.
        #expect(set.canRead(try Path("/public/secret"), root: root, auth: Self.alice, now: 0).allowed)
        #expect(set.canRead(try Path("/public/secret"), root: root, auth: nil, now: 0).allowed)
        #expect(!set.canRead(try Path("/"), root: root, auth: nil, now: 0).allowed)
        // A deeper grant does not cover the parent (rules are not filters).
        let child = try rules(#"{"rules":{"a":{"b":{".read":true,".write":true}}}}"#)
        #expect(!child.canRead(try Path("/a"), root: root, auth: nil, now: 0).allowed)
        #expect(child.canRead(try Path("/a/b/c"), root: root, auth: nil, now: 0).allowed)
        #expect(try !self.set(child, "/a", ["b": 1]).allowed)
        #expect(try self.set(child, "/a/b", 1).allowed)
        let admin: JSON = ["uid": "admin"]
        #expect(try self.set(set, "/locked/x", 1, auth: admin).allowed)
        #expect(try !self.set(set, "/locked/x", 1, auth: Self.alice).allowed)
    }

    @Test func validateRunsOnAncestorsAgainstMergedData() throws {
        let set = try rules(#"""
        {"rules": {".write": true,
                   "p": {".validate": "newData.hasChildren(['x'])", "sub": {"$k": {}}}}}
        """#)
        // Writing below /p validates /p against the merged value.
        #expect(try !self.set(set, "/p/sub/k1", 1).allowed)
        #expect(try self.set(set, "/p/sub/k1", 1, root: ["p": ["x": 1]]).allowed)
        // Deleting a required child is blocked by the ancestor; deleting everything is allowed.
        #expect(try !self.set(set, "/p/x", nil, root: ["p": ["x": 1, "y": 2]]).allowed)
        #expect(try self.set(set, "/p", nil, root: ["p": ["x": 1, "y": 2]]).allowed)
        // `.validate` never grants.
        let noGrant = try rules(#"{"rules":{"a":{".validate":true}}}"#)
        #expect(try !self.set(noGrant, "/a", 1).allowed)
        // Descendants of the written value are validated, siblings are not.
        let deep = try rules(#"""
        {"rules": {".write": true, "a": {"$k": {".validate": "newData.isNumber()"}}, "b": {".validate": false}}}
        """#)
        #expect(try self.set(deep, "/a", ["x": 1, "y": 2], root: ["b": "present"]).allowed)
        #expect(try !self.set(deep, "/a", ["x": 1, "y": "two"]).allowed)
    }

    @Test func multiPathUpdateIsAllOrNothing() throws {
        let set = try rules(#"""
        {"rules": {"users": {"$uid": {".write": "auth.uid == $uid",
                   ".validate": "newData.hasChildren(['name']) && root.child('users').child($uid).exists() == data.exists()"}}}}
        """#)
        let root = try tree(["users": ["alice": ["name": "A", "age": 2], "bob": ["name": "B"]]])
        func update(_ entries: [(String, JSON)]) throws -> RuleDecision {
            let writes = try entries.map { path, value in
                let target = try Path(path)
                return (target, try Node(json: value, at: target))
            }
            return set.canWrite(writes, root: root, auth: Self.alice, now: 0)
        }
        #expect(try update([("/users/alice/name", "Alice"), ("/users/alice/age", 3)]).allowed)
        #expect(try !update([("/users/alice/name", "Alice"), ("/users/bob/name", "Bob")]).allowed)
        // Every key sees the siblings written by the same update (one merged tree).
        #expect(try !update([("/users/alice/name", nil)]).allowed)
        #expect(try update([("/users/alice/name", nil), ("/users/alice/nick", "a"), ("/users/alice/name", "x")]).allowed)
        #expect(set.canWrite([], root: root, auth: nil, now: 0).allowed)
    }

    @Test func wildcardPrecedenceAndCaptures() throws {
        let set = try rules(#"""
        {"rules": {".write": true,
                   "widget": {"title": {".validate": "newData.isString()"}, "$other": {".validate": false}},
                   "items": {"$id": {".validate": "$id == '1' && $id != 1"}}}}
        """#)
        #expect(try self.set(set, "/widget", ["title": "x"]).allowed)
        #expect(try !self.set(set, "/widget", ["title": "x", "color": "red"]).allowed)
        #expect(try !self.set(set, "/widget/title", 5).allowed)
        #expect(try self.set(set, "/items/1", true).allowed)
        #expect(try !self.set(set, "/items/2", true).allowed)
        let read = try rules(#"{"rules":{"$a":{"$b":{".read":"$a != $b"}, "fixed": {".read": "$a == 'x'"}}}}"#)
        #expect(read.canRead(try Path("/x/y"), root: .null, auth: nil, now: 0).allowed)
        #expect(!read.canRead(try Path("/x/x"), root: .null, auth: nil, now: 0).allowed)
        #expect(read.canRead(try Path("/x/fixed"), root: .null, auth: nil, now: 0).allowed)
        #expect(!read.canRead(try Path("/y/fixed"), root: .null, auth: nil, now: 0).allowed)
    }

    @Test func dataAndNewDataAreRelativeToTheRuleNode() throws {
        let set = try rules(#"""
        {"rules": {".write": "newData.child('item/owner').val() == auth.uid || !newData.child('item').exists()",
                   "counter": {".write": true, ".validate": "newData.val() == data.val() + 1 && newData.parent().child('flag').val() == true"}}}
        """#)
        #expect(try self.set(set, "/item", ["owner": "alice"], auth: Self.alice).allowed)
        #expect(try !self.set(set, "/item", ["owner": "bob"], auth: Self.alice).allowed)
        #expect(try self.set(set, "/counter", 2, root: ["counter": 1, "flag": true]).allowed)
        #expect(try !self.set(set, "/counter", 3, root: ["counter": 1, "flag": true]).allowed)
    }

    @Test func priorityAndValMarker() throws {
        let set = try rules(#"""
        {"rules": {".read": "root.child('a').getPriority() == 5 && root.child('b').val() != null && root.child('c').val() == null"}}
        """#)
        let root = try tree(["a": [".value": 1, ".priority": 5], "b": ["x": 1]])
        #expect(set.canRead(.root, root: root, auth: nil, now: 0).allowed)
    }

    @Test func queryVariable() throws {
        let set = try rules(#"""
        {"rules": {"items": {".read": "query.orderByChild == 'owner' && query.equalTo == auth.uid && query.limitToFirst <= 10"}}}
        """#)
        let good = RuleQuery(orderBy: .child("owner"), equalTo: "alice", limitToFirst: 5)
        #expect(set.canRead(try Path("/items"), root: .null, auth: Self.alice, now: 0, query: good).allowed)
        var bad = good
        bad.equalTo = "bob"
        #expect(!set.canRead(try Path("/items"), root: .null, auth: Self.alice, now: 0, query: bad).allowed)
        #expect(!set.canRead(try Path("/items"), root: .null, auth: Self.alice, now: 0).allowed)
        #expect(try readRule("query.orderByKey == true && query.orderByValue == false && query.startAt == null"))
    }

    @Test func presenceRuleset() throws {
        let set = try rules(#"""
        {"rules":{"users":{"$userId":{"presence":{".read":"auth != null",".write":"auth.uid == $userId",
         ".validate":"newData.hasChildren(['online','lastSeen']) && newData.child('online').isBoolean() && newData.child('lastSeen').isNumber() && newData.child('lastSeen').val() <= now"}}}}}
        """#)
        #expect(try self.set(set, "/users/alice/presence", ["online": true, "lastSeen": 1000], auth: Self.alice).allowed)
        #expect(try !self.set(set, "/users/alice/presence", ["online": true, "lastSeen": 1001], auth: Self.alice).allowed)
        #expect(try !self.set(set, "/users/alice/presence", ["online": "yes", "lastSeen": 1], auth: Self.alice).allowed)
        #expect(try !self.set(set, "/users/bob/presence", ["online": true, "lastSeen": 1], auth: Self.alice).allowed)
        #expect(try self.set(set, "/users/alice/presence", nil, auth: Self.alice).allowed)
        let root = try tree(["users": ["alice": ["presence": ["online": true, "lastSeen": 1]]]])
        #expect(set.canRead(try Path("/users/alice/presence"), root: root, auth: Self.alice, now: 0).allowed)
        #expect(!set.canRead(try Path("/users"), root: root, auth: Self.alice, now: 0).allowed)
    }

    @Test func decisionReasonsNameTheRule() throws {
        let set = try rules(#"{"rules":{"users":{"$uid":{".write":"auth.uid == $uid",".validate":"newData.isString()"}}}}"#)
        let allowed = try self.set(set, "/users/alice", "x", auth: Self.alice)
        #expect(allowed.allowed)
        #expect(allowed.reason.contains("/rules/users/$uid/.write"))
        let invalid = try self.set(set, "/users/alice", 5, auth: Self.alice)
        #expect(!invalid.allowed)
        #expect(invalid.reason.contains("/rules/users/$uid/.validate"))
        let denied = try self.set(set, "/users/bob", "x", auth: Self.alice)
        #expect(denied.reason.contains("/rules/users/$uid/.write"))
    }

    @Test func builtInRuleSets() throws {
        #expect(RuleSet.allowAll.canRead(try Path("/a/b"), root: .null, auth: nil, now: 0).allowed)
        #expect(RuleSet.allowAll.canWrite([(try Path("/a"), Node(.number(1)))], root: .null, auth: nil, now: 0).allowed)
        #expect(!RuleSet.denyAll.canRead(.root, root: .null, auth: nil, now: 0).allowed)
        #expect(!RuleSet.denyAll.canWrite([(try Path("/a"), Node(.number(1)))], root: .null, auth: nil, now: 0).allowed)
        #expect(RuleSet.denyAll.document == ["rules": [:]])
    }
}
