import Testing
@testable import PresenceCore

@Suite struct ShallowTests {
    typealias F = QueryFixture

    @Test func objectChildrenBecomeTrue() {
        let node = F.node(#"{"a": {"x": 1}, "b": 2, "c": "s", "d": false, "e": {".value": 5, ".priority": 1}}"#)
        #expect(Shallow.shallow(node) == ["a": true, "b": 2, "c": "s", "d": false, "e": 5])
    }

    @Test func primitivesAndNull() {
        #expect(Shallow.shallow(Node(.string("x"))) == "x")
        #expect(Shallow.shallow(.leaf(.number(3), priority: .string("p"))) == 3)
        #expect(Shallow.shallow(.null) == .null)
    }
}
