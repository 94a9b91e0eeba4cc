import Testing
import PresenceCore

/// Loading documents: leniency, structure checks, static typing and error messages (spec §1).
@Suite("Rules loading")
struct RulesLoadingTests {
    func loadError(_ text: String, source: String = "database.rules.json") -> RulesLoadError? {
        do {
            _ = try RuleSet.load(text: text, source: source)
            return nil
        } catch {
            return error
        }
    }

    func accepts(_ text: String) -> Bool { loadError(text) == nil }

    func acceptsExpression(_ expression: String, kind: String = ".write") -> Bool {
        accepts(#"{"rules":{"$w":{"# + JSONWriter.string(.string(kind)) + ":" + JSONWriter.string(.string(expression)) + "}}}")
    }

    @Test func commentsAndMultilineStrings() throws {
        let text = """
        // Presence rules
        {
          /* block
             comment */
          "rules": {
            "a": { // trailing comment
              ".read": "auth != null
                        && auth.uid == 'x' // not a comment inside a string? it is: raw newline handled
              ",
              ".write": "true /* inside */"
            }
          }
        }
        """
        // The `//` inside the expression string is part of the string; expression comments are allowed.
        let set = try RuleSet.load(text: text, source: "commented.json")
        #expect(set.canRead(try Path("/a"), root: .null, auth: ["uid": "x"], now: 0).allowed)
        #expect(!set.canRead(try Path("/a"), root: .null, auth: ["uid": "y"], now: 0).allowed)
        let write: JSON? = set.document["rules"]?["a"]?[".write"]
        #expect(write == .string("true /* inside */"))
        let url = #"{"rules":{".read":"'http://x'.contains('//')"}}"#
        #expect(try RuleSet.load(text: url, source: "u").canRead(.root, root: .null, auth: nil, now: 0).allowed)
    }

    @Test func errorNamesFileRulePathPositionAndReason() throws {
        let text = #"{"rules":{"users":{"$uid":{".write":"auth.uid == $uid && skies === 'blue'"}}}}"#
        let error = try #require(loadError(text, source: "prod.rules.json"))
        #expect(error.source == "prod.rules.json")
        #expect(error.rulePath == "/rules/users/$uid/.write")
        #expect(error.position == 21)
        #expect(error.reason.contains("skies"))
        let description = error.description
        #expect(description.contains("prod.rules.json"))
        #expect(description.contains("/rules/users/$uid/.write"))
        #expect(description.contains("21"))
        #expect(description.contains("skies"))
        let syntax = try #require(loadError("{\"rules\": {\n  \"a\": {,}\n}}", source: "broken.json"))
        #expect(syntax.source == "broken.json")
        #expect(syntax.reason.contains("line 2"))
        let structural = try #require(loadError(#"{"rules":{"a":{".woops":true}}}"#))
        #expect(structural.rulePath == "/rules/a/.woops")
    }

    @Test func documentStructure() {
        #expect(accepts(#"{"rules":{}}"#))
        #expect(!accepts(#"{"rules":{}, "other": 1}"#))
        #expect(!accepts(#"{"noRules":{}}"#))
        #expect(!accepts(#"{"rules":true}"#))
        #expect(!accepts(#"[]"#))
        #expect(!accepts(#"{"rules":{"a":"true"}}"#))
        #expect(!accepts(#"{"rules":{"a":null}}"#))
        #expect(!accepts(#"{"rules":{".read":1}}"#))
        #expect(!accepts(#"{"rules":{".read":null}}"#))
        #expect(accepts(#"{"rules":{".read":"true",".write":"false",".validate":true,".indexOn":".value"}}"#))
        #expect(accepts(#"{"rules":{".indexOn":["a","b"]}}"#))
        #expect(!accepts(#"{"rules":{".indexOn":[1]}}"#))
        #expect(!accepts(#"{"rules":{".indexOn":true}}"#))
        #expect(!accepts(#"{"rules":{"a":{"$x":{},"$y":{}}}}"#))
        #expect(!accepts(#"{"rules":{"$x":{"a":{"$x":{}}}}}"#))
        #expect(accepts(#"{"rules":{"$x":{"a":{"$y":{".read":"$x != $y"}}}}}"#))
        #expect(!accepts(#"{"rules":{"$x":{".read":"$y == ''"}}}"#))
        #expect(!accepts(#"{"rules":{"a":{".read":"$x == ''"},"$x":{}}}"#))
    }

    @Test func staticTyping() {
        #expect(!acceptsExpression("7"))
        #expect(!acceptsExpression("'foo'"))
        #expect(!acceptsExpression("auth.uid && true"))
        #expect(!acceptsExpression("!auth.isAdmin"))
        #expect(acceptsExpression("auth.isAdmin == true"))
        #expect(!acceptsExpression("newData.exists()", kind: ".read"))
        #expect(acceptsExpression("newData.exists()", kind: ".validate"))
        #expect(!acceptsExpression("root.hasChildren('a', 'b')"))
        #expect(!acceptsExpression("root.hasChildren([])"))
        #expect(acceptsExpression("root.hasChildren([auth.uid, 'b'])"))
        #expect(!acceptsExpression("root.child(1).exists()"))
        #expect(!acceptsExpression("root.child('a') == null"))
        #expect(!acceptsExpression("root.exists"))
        #expect(!acceptsExpression("root.val()['a'] == 1"))
        #expect(acceptsExpression("root.val()['length'] == 1"))
        #expect(acceptsExpression("auth.token['firebase']['sign_in_provider'] == 'x'"))
        #expect(acceptsExpression("auth.foo[$w] == true"))
        #expect(!acceptsExpression("1 < 'a'"))
        #expect(acceptsExpression("data.val() < 'a'"))
        #expect(!acceptsExpression("1 + true == 2"))
        #expect(!acceptsExpression("+1 == 1"))
        #expect(!acceptsExpression("a = 1"))
        #expect(!acceptsExpression("true; true"))
        #expect(!acceptsExpression("(true, true)"))
        #expect(!acceptsExpression("1 & 1 == 1"))
        #expect(!acceptsExpression("typeof auth == 'object'"))
        #expect(!acceptsExpression("Math.max(1, 2) == 2"))
        #expect(!acceptsExpression("now.foo == 1"))
        #expect(!acceptsExpression("query.foo == 1"))
        #expect(acceptsExpression("query.limitToFirst == 1"))
        #expect(acceptsExpression("newData.val() + 1 === data.val()"))
        #expect(acceptsExpression("$w.length > 2 && $w.matches(/^[a-z]+$/)"))
    }

    @Test func regexLiterals() {
        #expect(acceptsExpression("$w.matches(/^a+$/i)"))
        #expect(!acceptsExpression("$w.matches(/a/g)"))
        #expect(!acceptsExpression("$w.matches(/a/ii)"))
        #expect(!acceptsExpression("$w.matches('a')"))
        #expect(!acceptsExpression("$w.matches(/(^a)/)"))
        #expect(!acceptsExpression("$w.matches(/a$b/)"))
        #expect(!acceptsExpression("$w.matches(/a|/)"))
        #expect(!acceptsExpression("$w.matches(/()/)"))
        #expect(!acceptsExpression("$w.matches(/a**/)"))
        #expect(!acceptsExpression("$w.matches(/[b-a]/)"))
        #expect(!acceptsExpression("$w.matches(/[abc/)"))
        #expect(acceptsExpression("$w.matches(/a*?b{2,3}c{1,}/)"))
        #expect(acceptsExpression("$w.matches(/*a/)") == false)  // `/*` starts a comment in JavaScript
        #expect(acceptsExpression("$w.matches(/+a/)"))
        #expect(acceptsExpression("$w.matches(/[\\d\\s-]+/)"))
    }
}
