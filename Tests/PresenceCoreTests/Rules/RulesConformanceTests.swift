import Testing
import PresenceCore

@Suite("Rules conformance vectors")
struct RulesConformanceTests {
    @Test("fixtures are present")
    func fixturesPresent() {
        #expect(RulesFixtures.runtime.count > 100)
        #expect(RulesFixtures.parse.count > 20)
    }

    @Test("runtime vector", arguments: RulesFixtures.runtime)
    func runtime(_ vector: RulesVector) throws {
        guard case .bool(let expected)? = vector.json["expect"] else {
            Issue.record("\(vector.name): vector has no boolean expect")
            return
        }
        let decision = try RulesHarness.run(vector.json)
        #expect(decision.allowed == expected, "\(vector.name): got \(decision)")
    }

    @Test("load-time vector", arguments: RulesFixtures.parse)
    func parse(_ vector: RulesVector) throws {
        guard case .bool(let valid)? = vector.json["valid"] else {
            Issue.record("\(vector.name): vector has no boolean valid flag")
            return
        }
        let rules = try #require(vector.json["rules"])
        let text = JSONWriter.string(rules)
        do {
            _ = try RuleSet.load(text: text, source: "vector.json")
            #expect(valid, "\(vector.name): loaded but should be rejected")
        } catch {
            #expect(!valid, "\(vector.name): rejected but should load: \(error)")
        }
    }
}
