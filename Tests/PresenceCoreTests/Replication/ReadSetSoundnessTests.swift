import Testing
import PresenceCore

/// Differential soundness of read-set recording: a decision must not change when the stored tree
/// changes only outside the recorded read set. Writes are drawn near what matters (the read set,
/// the operation's paths, the stored tree) and checked with `ReadSet.conflicts(with:)` and the
/// exact `WrittenPath` of each write. Two more counts keep it meaningful: conflicting writes do
/// change many decisions (the writes reach what matters), and thousands of writes fall outside the
/// read sets (a recorder that recorded everything would leave none).
@Suite("Read-set soundness")
struct ReadSetSoundnessTests {
    static func vectorCase(_ vector: RulesVector) throws -> DecisionCase {
        let v = vector.json
        let rules = try RuleSet.load(text: JSONWriter.string(try #require(v["rules"])), source: "vector")
        let root = try Node(json: v["root"] ?? .null)
        let auth = v["auth"].flatMap { $0.isNull ? nil : $0 }
        let now = Int64(v["now"]?.numberValue ?? 0)
        let op = v["op"]?.stringValue ?? ""
        let path = v["path"]?.stringValue ?? "/"
        let operation: DecisionCase.Operation
        if op == "read" {
            operation = .read(try Path(path), v["query"].flatMap { $0.isNull ? nil : RuleQuery(json: $0) })
        } else {
            operation = .write(try RulesHarness.writes(op: op, path: path, data: v["data"] ?? .null, root: root, now: now))
        }
        return DecisionCase(name: vector.name, rules: rules, root: root, auth: auth, now: now, operation: operation)
    }

    @Test("every rules vector keeps its decision outside its read set")
    func vectors() throws {
        var tally = SoundnessTally()
        for vector in RulesFixtures.runtime {
            let decisionCase = try Self.vectorCase(vector)
            if case .bool(let expected)? = vector.json["expect"] {
                var readSet = ReadSet()
                switch decisionCase.operation {
                case let .read(path, query):
                    #expect(decisionCase.rules.canRead(path, root: decisionCase.root, auth: decisionCase.auth,
                                                       now: decisionCase.now, query: query, recording: &readSet).allowed == expected,
                            "\(vector.name)")
                case .write(let writes):
                    #expect(decisionCase.rules.canWrite(writes, root: decisionCase.root, auth: decisionCase.auth,
                                                        now: decisionCase.now, recording: &readSet).allowed == expected,
                            "\(vector.name)")
                }
            }
            tally.add(ReadSetHarness.check(decisionCase, seeds: 0..<150))
        }
        #expect(tally.outside > 10_000)
        // The converse: writes that conflict with the read set do change decisions, in many vectors.
        #expect(tally.casesReading >= 20, "\(tally)")
        #expect(tally.casesFlipped * 3 > tally.casesReading * 2, "\(tally)")
    }

    @Test("random rules, data and writes keep their decision outside their read set")
    func randomRules() {
        var generator = RandomRules(seed: 2026)
        var tally = SoundnessTally()
        for index in 0..<400 {
            tally.add(ReadSetHarness.check(generator.decisionCase(index), seeds: 0..<50))
        }
        #expect(tally.outside > 8_000)
        #expect(tally.casesReading > 150, "\(tally)")
        #expect(tally.casesFlipped * 3 > tally.casesReading, "\(tally)")
    }
}
