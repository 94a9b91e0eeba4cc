import PresenceCore
import Testing

@Suite struct NodeTests {
    func node(_ text: String) throws -> Node { try Node(json: JSONParser.parse(text)) }

    @Test func nullAndEmptyObjectsMeanNoData() throws {
        #expect(try node("null").isNull)
        #expect(try node("{}").isNull)
        #expect(try node(#"{"a":null,"b":{}}"#).isNull)
        #expect(try node(#"{"a":null,"b":1}"#).jsonString() == #"{"b":1}"#)
    }

    @Test func arraysBecomeIntegerKeyedObjects() throws {
        #expect(try node(#"[1,null,"x"]"#).jsonString() == #"{"0":1,"2":"x"}"#)
    }

    @Test func prioritiesAndValueAreKeptInExportFormat() throws {
        let leaf = try node(#"{".value":5,".priority":1}"#)
        #expect(leaf.priority == .number(1))
        #expect(leaf.jsonString() == "5")
        #expect(leaf.jsonString(exportFormat: true) == #"{".value":5,".priority":1}"#)
        let branch = try node(#"{"a":1,".priority":"p"}"#)
        #expect(branch.jsonString(exportFormat: true) == #"{"a":1,".priority":"p"}"#)
    }

    @Test func rejectsInvalidKeysAndUnresolvedServerValues() {
        #expect(throws: DataError.self) { try node(#"{"a.b":1}"#) }
        #expect(throws: DataError.self) { try node(#"{"":1}"#) }
        #expect(throws: DataError.self) { try node(#"{"a":{".sv":"timestamp"}}"#) }
        #expect(throws: DataError.self) { try node(#"{".woops":1}"#) }
    }

    @Test func enforcesDepthOfNestedData() throws {
        var text = "1"
        for _ in 0..<33 { text = "{\"k\":\(text)}" }
        #expect(throws: DataError.self) { try node(text) }
        let at = try Path("/" + Array(repeating: "k", count: 30).joined(separator: "/"))
        #expect(throws: DataError.self) { try Node(json: JSONParser.parse(#"{"a":{"b":{"c":1}}}"#), at: at) }
    }

    @Test func setReplacesDeletesAndPrunesEmptyParents() throws {
        var root = Node.null
        root.set(try node(#"{"online":true}"#), at: try Path("/users/alice/presence"))
        root.set(try node("1"), at: try Path("/users/bob/x"))
        #expect(root.node(at: try Path("/users/alice/presence/online")) == Node(.bool(true)))
        root.set(.null, at: try Path("/users/alice/presence/online"))
        #expect(root.node(at: try Path("/users/alice")).isNull)
        #expect(root.jsonString() == #"{"users":{"bob":{"x":1}}}"#)
        // Writing under a leaf replaces the leaf with a branch.
        root.set(try node("2"), at: try Path("/users/bob/x/y"))
        #expect(root.jsonString() == #"{"users":{"bob":{"x":{"y":2}}}}"#)
    }

    @Test func keysSortIntegersFirstThenStrings() {
        #expect(KeyOrder.sortedKeys(["b", "10", "a", "2", "-1", "1a"]) == ["-1", "2", "10", "1a", "a", "b"])
    }
}
