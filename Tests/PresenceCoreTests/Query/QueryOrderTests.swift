import Testing
@testable import PresenceCore

@Suite struct QueryOrderTests {
    typealias F = QueryFixture

    /// Expected order computed with the JS client's `nameCompare` (util.ts).
    @Test func keyOrderMixesIntegerLikeAndStringKeys() {
        let keys = ["b", "a", "1", "-1", "01", "10", "2", "2147483647", "2147483648", "-2147483648", "-2147483649",
                    "1.5", "A", "é", "😀", "\u{FF61}", "0", "00", "-10", "0010", "9999999999", "abc", "ab", "-", "a b"]
        let expected = ["-2147483648", "-10", "-1", "0", "00", "1", "01", "2", "10", "0010", "2147483647",
                        "-", "-2147483649", "1.5", "2147483648", "9999999999", "A", "a", "a b", "ab", "abc", "b",
                        "é", "😀", "\u{FF61}"]
        var children: [String: Node] = [:]
        for key in keys { children[key] = Node(.bool(true)) }
        #expect(F.ordered(.branch(children, priority: nil), by: .key) == expected)
        #expect(keys.sorted { QueryOrder.compareNames($0, $1) < 0 } == expected)
    }

    /// JS `tryParseInt` (`^-?(0*)\d{1,10}$`, then the int32 range) takes "-0" (as 0) and integers
    /// with any number of leading zeros; equal values order the shorter key first.
    @Test func keyOrderEdgeCasesOfTheJSClient() {
        let keys = ["a", "00000000001", "2", "-0", "0", "1", "000000000000005"]
        #expect(keys.sorted { QueryOrder.compareNames($0, $1) < 0 }
            == ["0", "-0", "1", "00000000001", "2", "000000000000005", "a"])
        #expect(KeyOrder.intValue("-00") == 0 && KeyOrder.intValue("0000") == 0)
        #expect(KeyOrder.intValue("2147483647") == Int32.max && KeyOrder.intValue("-2147483648") == Int32.min)
        #expect(KeyOrder.intValue("2147483648") == nil && KeyOrder.intValue("12345678901") == nil)
        #expect(KeyOrder.intValue("00012345678901") == nil && KeyOrder.intValue("0001234567890") == 1_234_567_890)
        #expect(KeyOrder.intValue("-") == nil && KeyOrder.intValue("") == nil && KeyOrder.intValue("1-") == nil
                && KeyOrder.intValue("+1") == nil && KeyOrder.intValue("1.0") == nil)
    }

    @Test func unicodeKeysCompareByUTF16CodeUnits() {
        // U+1F600 is D83D DE00 in UTF-16, below U+FF61, although its scalar value is higher.
        #expect(QueryOrder.compareNames("😀", "\u{FF61}") < 0)
        #expect(QueryOrder.compareNames("\u{FF61}", "😀") > 0)
        // Canonically equivalent but different code units are different keys.
        #expect(QueryOrder.compareNames("\u{E9}", "e\u{301}") > 0)
        #expect(QueryOrder.compareNames("e\u{301}", "\u{E9}") < 0)
    }

    @Test func sentinelsBoundEveryKey() {
        for key in ["-2147483648", "0", "a", "zzz", "\u{FFFF}"] {
            #expect(QueryOrder.compareNames(QueryOrder.minName, key) < 0)
            #expect(QueryOrder.compareNames(key, QueryOrder.minName) > 0)
            #expect(QueryOrder.compareNames(QueryOrder.maxName, key) > 0)
            #expect(QueryOrder.compareNames(key, QueryOrder.maxName) < 0)
        }
        #expect(QueryOrder.compareNames(QueryOrder.minName, QueryOrder.maxName) < 0)
        #expect(QueryOrder.compareNames(QueryOrder.maxName, QueryOrder.maxName) == 0)
    }

    @Test func valueOrderRanksTypesThenValuesThenKeys() {
        let node = F.node("""
            {"a": true, "b": false, "c": 5, "d": -1, "e": "x", "f": "10", "g": {"z": 1}, "h": {"y": 2},
             "i": 5, "j": 1e20, "k": "X", "l": 4294967296, "m": -0.5, "2": "x", "10": "x"}
            """)
        #expect(F.ordered(node, by: .value) == ["b", "a", "d", "m", "c", "i", "l", "j", "f", "k", "2", "10", "e", "g", "h"])
    }

    @Test func valueOrderOfNodes() {
        let null = Node.null
        let values: [Node] = [null, Node(.bool(false)), Node(.bool(true)), Node(.number(-1e300)), Node(.number(0)),
                              Node(.number(3e9)), Node(.string("")), Node(.string("A")), Node(.string("a")),
                              F.node(#"{"x":1}"#)]
        for (i, a) in values.enumerated() {
            for (j, b) in values.enumerated() {
                let order = QueryOrder.compareValues(a, b)
                #expect(i < j ? order < 0 : (i == j ? order == 0 : order > 0), "\(i) vs \(j)")
            }
        }
        #expect(QueryOrder.compareValues(F.node(#"{"x":1}"#), F.node(#"{"a":"b"}"#)) == 0)
        #expect(QueryOrder.compareValues(Node(.number(-0.0)), Node(.number(0))) == 0)
        // Priorities do not take part in value order.
        #expect(QueryOrder.compareValues(F.node(#"{".value":1,".priority":9}"#), Node(.number(1))) == 0)
    }

    @Test func priorityOrderIsNoneThenNumbersThenStringsThenKey() {
        let node = F.node("""
            {"a": {".value": 1, ".priority": "b"}, "b": {".value": 1, ".priority": 2}, "c": 1,
             "d": {"x": 1, ".priority": -3}, "e": {".value": 1, ".priority": "a"}, "f": {".value": 1, ".priority": 2},
             "g": {".value": 1, ".priority": "10"}, "1": true, "h": {".value": 1, ".priority": 1e10}}
            """)
        #expect(F.ordered(node, by: .priority) == ["1", "c", "d", "b", "f", "h", "g", "e", "a"])
        #expect(QueryOrder.comparePriorities(nil, .number(-1e300)) < 0)
        #expect(QueryOrder.comparePriorities(.number(1e300), .string("")) < 0)
        #expect(QueryOrder.comparePriorities(.string("a"), .string("a")) == 0)
    }

    @Test func childOrderReadsNestedPathsAndMissingChildrenComeFirst() {
        let node = F.node("""
            {"a": {"r": {"pos": 3}}, "b": {"r": {"pos": "x"}}, "c": {"r": 5}, "d": {"other": 1},
             "e": {"r": {"pos": false}}, "f": 7, "g": {"r": {"pos": {"deep": 1}}}, "h": {"r": {"pos": 3}}}
            """)
        #expect(F.ordered(node, by: F.child("r/pos")) == ["c", "d", "f", "e", "a", "h", "b", "g"])
    }

    @Test func childIndexCanReadAChildsPriority() {
        let node = F.node("""
            {"a": {"x": {".value": 1, ".priority": 5}}, "b": {"x": {".value": 1, ".priority": 2}}, "c": {"x": 1}}
            """)
        #expect(F.ordered(node, by: F.child("x/.priority")) == ["c", "b", "a"])
    }

    @Test func dinosaursInEveryIndex() {
        #expect(F.ordered(F.dinosaurs, by: .key) == ["bruhathkayosaurus", "lambeosaurus", "linhenykus",
                                                      "pterodactyl", "stegosaurus", "triceratops"])
        #expect(F.ordered(F.scores, by: .value) == ["stegosaurus", "lambeosaurus", "triceratops",
                                                     "bruhathkayosaurus", "linhenykus", "pterodactyl"])
        #expect(F.ordered(F.dinosaurs, by: F.child("height")) == F.heightSorted)
        #expect(F.ordered(F.dinosaurs, by: .priority) == F.ordered(F.dinosaurs, by: .key))
    }

    @Test func pairwiseCompareByIndex() {
        let one = Node(.number(1)), two = Node(.number(2))
        #expect(QueryOrder.compare(("b", one), ("a", two), by: .value) < 0)
        #expect(QueryOrder.compare(("b", one), ("a", one), by: .value) > 0)
        #expect(QueryOrder.compare(("b", one), ("a", two), by: .key) > 0)
        #expect(QueryOrder.compare(("10", one), ("9", one), by: .priority) > 0)
        #expect(QueryOrder.compare(("a", QueryFixture.node(#"{"x": 1}"#)), ("b", one), by: F.child("x")) > 0)  // b has no x: null first
        #expect(QueryOrder.compare(("a", one), ("a", one), by: .value) == 0)
    }

    @Test func leavesAndNullHaveNoChildren() {
        #expect(QueryOrder.sortedChildren(of: Node(.number(1)), by: .value).isEmpty)
        #expect(QueryOrder.sortedChildren(of: .null, by: .key).isEmpty)
    }
}
