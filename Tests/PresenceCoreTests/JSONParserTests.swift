import PresenceCore
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKindOfValueAndKeepsBooleansApartFromNumbers() throws {
        let json = try JSONParser.parse(#"{"a":true,"b":1,"c":1.5,"d":-2e3,"e":null,"f":[1,"x"],"g":"\u00e9\n\"","h":0}"#)
        #expect(json["a"] == .bool(true))
        #expect(json["b"] == .number(1))
        #expect(json["c"] == .number(1.5))
        #expect(json["d"] == .number(-2000))
        #expect(json["e"] == .null)
        #expect(json["f"] == .array([.number(1), .string("x")]))
        #expect(json["g"] == .string("é\n\""))
        #expect(json["h"] == .number(0))
    }

    @Test func decodesSurrogatePairs() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(#""\ud83d""#) }
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":}", "tru", "01", "1.", "\"unterminated", "{\"a\":1}x", "[1 2]", "{'a':1}", "\"\u{01}\"", "NaN",
    ])
    func rejectsMalformedText(_ text: String) {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(text) }
    }

    @Test func limitsNestingDepth() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        _ = try JSONParser.parse(ok)
    }

    @Test func writerPrintsIntegersWithoutFractionAndEscapesStrings() {
        #expect(JSONWriter.string(.number(1795326602061)) == "1795326602061")
        #expect(JSONWriter.string(.number(1.5)) == "1.5")
        #expect(JSONWriter.string(.string("a\"b\\c\n\u{01}")) == #""a\"b\\c\n\u0001""#)
        #expect(JSONWriter.string(.object([("k", .array([.null, .bool(false)]))])) == #"{"k":[null,false]}"#)
    }
}
