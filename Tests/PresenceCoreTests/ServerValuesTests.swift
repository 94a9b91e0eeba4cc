import PresenceCore
import Testing

@Suite struct ServerValuesTests {
    func resolve(_ text: String, stored: Node = .null, now: Int64 = 42) throws -> JSON {
        try ServerValues.resolve(JSONParser.parse(text), at: Path("/x"), now: now, current: { _ in stored })
    }

    @Test func timestampResolvesToNowEverywhereInTheValue() throws {
        let json = try resolve(#"{"a":{".sv":"timestamp"},"b":[{".sv":"timestamp"}]}"#)
        #expect(json == .object([("a", .number(42)), ("b", .array([.number(42)]))]))
    }

    @Test(arguments: [
        (Node.null, 1.0), (Node(.number(5)), 6.0), (Node(.string("hello")), 1.0),
        (Node.branch(["hello": Node(.string("world"))], priority: nil), 1.0),
    ])
    func incrementAddsToANumberAndReplacesAnythingElse(stored: Node, expected: Double) throws {
        #expect(try resolve(#"{".sv":{"increment":1}}"#, stored: stored) == .number(expected))
    }

    /// Issue 16: ±Infinity read back as null; an overflowing increment must be refused.
    @Test(arguments: [(-1.7e308, -1.7e308), (1.7e308, 1.7e308), (Double.greatestFiniteMagnitude, 1e292)])
    func incrementThatOverflowsIsRefused(stored: Double, delta: Double) throws {
        #expect(throws: DataError.invalidData(path: "/x", reason: "increment overflows: the result is beyond ±1.7976931348623157e308")) {
            try resolve(#"{".sv":{"increment":\#(delta)}}"#, stored: Node(.number(stored)))
        }
        #expect(try resolve(#"{".sv":{"increment":\#(-delta)}}"#, stored: Node(.number(stored))) == .number(stored - delta))
    }

    @Test func dataWithANonFiniteNumberIsRefused() {
        for n in [Double.infinity, -Double.infinity, Double.nan] {
            #expect(throws: DataError.self) { try Node(json: .object([("a", .number(n))]), at: Path("/x")) }
            #expect(throws: DataError.self) { try Node(json: .object([(".value", 1), (".priority", .number(n))]), at: Path("/x")) }
        }
    }

    @Test func unknownServerValuesAreRejected() {
        #expect(throws: DataError.self) { try resolve(#"{".sv":"nope"}"#) }
        #expect(throws: DataError.self) { try resolve(#"{".sv":{"decrement":1}}"#) }
    }
}
