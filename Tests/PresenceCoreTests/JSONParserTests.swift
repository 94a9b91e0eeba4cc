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

    /// Strings are scanned 8 bytes at a time until a word holds a quote, a backslash or a control
    /// byte: each of those, at every position in and across the words, ends or escapes the string
    /// or fails it exactly as the byte at a time loop does.
    @Test func aStringsQuoteEscapeOrControlByteIsFoundAtEveryOffset() throws {
        for prefix in 0..<26 {
            for filler in ["a", "é", "😀"] {
                let plain = String(repeating: filler, count: prefix)
                #expect(try JSONParser.parse("\"" + plain + "\"") == .string(plain))
                #expect(try JSONParser.parse("[\"" + plain + "\",1]") == .array([.string(plain), .number(1)]))
                #expect(try JSONParser.parse("\"" + plain + "\\n" + plain + "\"") == .string(plain + "\n" + plain))
                #expect(try JSONParser.parse("\"" + plain + "\\\"x\"") == .string(plain + "\"x"))
                for control in ["\u{00}", "\u{01}", "\u{1F}", "\n", "\t"] {
                    #expect(throws: JSONParser.Error.self) { try JSONParser.parse("\"" + plain + control + plain + "\"") }
                }
                // Bytes just above the special ones pass.
                #expect(try JSONParser.parse("\"" + plain + " !#[]^\u{7F}" + plain + "\"") == .string(plain + " !#[]^\u{7F}" + plain))
                #expect(throws: JSONParser.Error.self) { try JSONParser.parse("\"" + plain) }
            }
        }
    }

    @Test func limitsNestingDepth() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        _ = try JSONParser.parse(ok)
    }

    /// Both writers copy plain runs a word at a time; every special byte, at every offset and
    /// between 1-, 2- and 4-byte characters, must still be escaped exactly as one at a time.
    @Test func writersEscapeEverySpecialByteAtEveryOffset() throws {
        func expected(_ s: String) -> String {
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{08}": out += "\\b"
                case "\u{0C}": out += "\\f"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        let specials = ["\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0C}", "\u{00}", "\u{01}", "\u{1F}"]
        for prefix in 0..<20 {
            for filler in ["a", "é", "😀"] {
                let plain = String(repeating: filler, count: prefix)
                var texts = [plain, plain + " !#[]^\u{7F}/" + plain]
                for special in specials {
                    texts += [plain + special, special + plain, plain + special + plain + special + special + plain]
                }
                for text in texts {
                    var viaString = ""
                    JSONWriter.writeString(text, into: &viaString)
                    #expect(viaString == expected(text))
                    var viaBytes: [UInt8] = []
                    Node.leaf(.string(text), priority: nil).writeJSON(into: &viaBytes)
                    #expect(String(decoding: viaBytes, as: UTF8.self) == expected(text))
                    let keyed = Node.branch([text: .leaf(.bool(true), priority: nil)], priority: nil)
                    #expect(keyed.jsonString() == "{" + expected(text) + ":true}")
                    #expect(try JSONParser.parse(viaString) == .string(text))
                }
            }
        }
    }

    @Test func writerPrintsIntegersWithoutFractionAndEscapesStrings() {
        #expect(JSONWriter.string(.number(1795326602061)) == "1795326602061")
        #expect(JSONWriter.string(.number(1.5)) == "1.5")
        #expect(JSONWriter.string(.string("a\"b\\c\n\u{01}")) == #""a\"b\\c\n\u0001""#)
        #expect(JSONWriter.string(.object([("k", .array([.null, .bool(false)]))])) == #"{"k":[null,false]}"#)
    }
}

/// Issue 16: no number outside the double range is ever accepted as data.
@Suite struct ClientNumberTests {
    @Test(arguments: ["1e400", "-1e400", "1E+309", "123456789e301"])
    func strictParseRefusesNumbersBeyondTheDoubleRange(text: String) {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse("[" + text + "]") }
    }

    @Test func overflowReportingParseKeepsTheDocumentAndSaysWhere() throws {
        let (json, overflowed) = try JSONParser.parseReportingOverflow(bytes: Array(#"{"a":[1,{"b":-1e400}],"c":2}"#.utf8))
        #expect(overflowed)
        #expect(json.firstNonFiniteNumber() == "a/1/b")
        let (plain, clean) = try JSONParser.parseReportingOverflow(bytes: Array(#"{"a":1e308}"#.utf8))
        #expect(!clean && plain.firstNonFiniteNumber() == nil)
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e300, 9.3e18, -9.3e18, 9_007_199_254_740_992, 0.5, -0.5])
    func integerNeverTrapsAndRefusesWhatIsNotAWholeNumberInRange(value: Double) {
        #expect(ClientInput.integer(value, in: 0...ClientInput.maxSafeInteger) == nil)
    }

    @Test func integerAcceptsTheEndsOfTheRange() {
        #expect(ClientInput.integer(0.0, in: 0...ClientInput.maxSafeInteger) == 0)
        #expect(ClientInput.integer(-0.0, in: 0...ClientInput.maxSafeInteger) == 0)
        #expect(ClientInput.integer(9_007_199_254_740_991.0, in: 0...ClientInput.maxSafeInteger) == ClientInput.maxSafeInteger)
    }

    @Test func quotedKeepsAShortEscapedPrefix() {
        #expect(ClientInput.quoted("abc") == #""abc""#)
        #expect(ClientInput.quoted("a\n\"b") == #""a\n\"b""#)
        let huge = String(repeating: "é", count: 1 << 20)
        #expect(ClientInput.quoted(huge) == "\"" + String(repeating: "é", count: 40) + "…\" (2097152 bytes)")
        // One grapheme cluster of a million scalars is still cut after 40 scalars.
        let cluster = "e" + String(repeating: "\u{301}", count: 1 << 20)
        #expect(ClientInput.quoted(cluster).utf8.count < 120)
    }
}

@Suite struct JSONEqualityTests {
    /// Found by fuzzing: an object with a repeated key compared unequal to itself.
    @Test func objectWithARepeatedKeyEqualsItselfAndReadsLikeSubscript() throws {
        let json = try JSONParser.parse(#"{"a":1,"b":true,"a":2}"#)
        #expect(json == json)
        #expect(json == .object([("b", true), ("a", 2)]))
        #expect(json != .object([("a", 1), ("b", true)]))
    }
}
