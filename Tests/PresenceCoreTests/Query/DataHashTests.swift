import Testing
@testable import PresenceCore

@Suite struct DataHashTests {
    typealias F = QueryFixture

    /// A stand-in digest: the bytes themselves, so a child's "hash" is the base64 of its pre-image.
    static func identity(_ bytes: [UInt8]) -> [UInt8] { bytes }

    func preimage(_ node: Node) -> String { DataHash.preimage(node, digest: Self.identity) }
    func childHash(_ preimage: String) -> String { DataHash.base64(Array(preimage.utf8)) }

    @Test func leafPreimages() {
        #expect(preimage(Node(.number(1))) == "number:3ff0000000000000")
        #expect(preimage(Node(.number(2))) == "number:4000000000000000")
        #expect(preimage(Node(.number(-2.5))) == "number:c004000000000000")
        #expect(preimage(Node(.bool(true))) == "boolean:true")
        #expect(preimage(Node(.bool(false))) == "boolean:false")
        #expect(preimage(Node(.string("hi"))) == "string:hi")
        #expect(preimage(Node(.string(""))) == "string:")
        #expect(preimage(Node(.string("a:b é"))) == "string:a:b é")
    }

    @Test func priorityPrefix() {
        #expect(preimage(.leaf(.string("hi"), priority: .number(1))) == "priority:number:3ff0000000000000:string:hi")
        #expect(preimage(.leaf(.bool(true), priority: .string("p"))) == "priority:string:p:boolean:true")
        #expect(preimage(F.node(#"{"a": true, ".priority": "x"}"#)) == "priority:string:x::a:" + childHash("boolean:true"))
    }

    @Test func emptyNodeHashesToEmptyString() {
        #expect(preimage(.null) == "")
        #expect(DataHash.hash(.null, digest: Self.identity) == "")
        #expect(DataHash.hash(.null, digest: { _ in fatalError("no digest for an empty node") }) == "")
    }

    @Test func leafHashIsBase64OfDigest() {
        #expect(DataHash.hash(Node(.number(1)), digest: Self.identity) == "bnVtYmVyOjNmZjAwMDAwMDAwMDAwMDA=")
        #expect(DataHash.hash(Node(.bool(true)), digest: Self.identity) == "Ym9vbGVhbjp0cnVl")
        #expect(DataHash.hash(Node(.string("hi")), digest: { _ in [0xFF, 0x00, 0x10] }) == "/wAQ")
    }

    @Test func branchPreimage() {
        #expect(preimage(F.node(#"{"a": 1}"#)) == ":a:bnVtYmVyOjNmZjAwMDAwMDAwMDAwMDA=")
        #expect(preimage(F.node(#"{"b": "hi", "a": 1}"#))
            == ":a:bnVtYmVyOjNmZjAwMDAwMDAwMDAwMDA=:b:c3RyaW5nOmhp")
        let nested = F.node(#"{"x": {"y": true}}"#)
        #expect(preimage(nested) == ":x:" + childHash(":y:" + childHash("boolean:true")))
    }

    /// Children go in priority order, not key order: no priority, then numbers, then strings.
    @Test func childrenInPriorityOrder() {
        let node = F.node("""
            {"a": {".value": 1, ".priority": 2}, "b": {".value": 1, ".priority": 1}, "c": 3,
             "d": {".value": 1, ".priority": "s"}, "1": 1}
            """)
        let one = "number:3ff0000000000000"
        let expected = ":1:" + childHash(one)
            + ":c:" + childHash("number:4008000000000000")
            + ":b:" + childHash("priority:number:3ff0000000000000:" + one)
            + ":a:" + childHash("priority:number:4000000000000000:" + one)
            + ":d:" + childHash("priority:string:s:" + one)
        #expect(preimage(node) == expected)
    }

    /// Without priorities the children are hashed in key order, sorted the fast way (each key read
    /// once); it must be the priority order the general comparison gives, for every kind of key.
    @Test func childrenWithoutPrioritiesInTheSameOrderAsTheGeneralSort() {
        let kinds = ["0", "7", "007", "-3", "-0", "10", "2147483647", "2147483648", "-2147483649", "a", "B", "ab", "a b",
                     "é", "z", "\u{E000}", "\u{1D11E}", "\u{FF5E}", "1a", "-", "00"]
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            var children: [String: Node] = [:]
            for index in 0..<(17 + round * 3) {
                let key = kinds[Int.random(in: 0..<kinds.count, using: &generator)] + (index % 3 == 0 ? "" : String(index))
                children[key] = Node(.number(Double(index)))
            }
            let node = Node.branch(children, priority: nil)
            var expected = ""
            for (key, child) in QueryOrder.sortedChildren(of: node, by: .priority) {
                expected += ":" + key + ":" + DataHash.hash(child, digest: { $0 })
            }
            #expect(DataHash.preimage(node, digest: { $0 }) == expected, "keys \(children.keys.sorted())")
        }
    }

    @Test func digestReceivesUTF8OfThePreimage() {
        var seen: [[UInt8]] = []
        _ = DataHash.hash(Node(.string("é")), digest: { bytes in seen.append(bytes); return [1] })
        #expect(seen == [Array("string:é".utf8)])
    }

    /// Expected strings computed with the JS client's own `doubleToIEEE754String`; where they differ
    /// from the bit pattern (marked), the client's arithmetic is inexact and we follow the client.
    @Test(arguments: [
        (1.0, "3ff0000000000000"),
        (0.0, "0000000000000000"),
        (-0.0, "8000000000000000"),
        (-1.0, "bff0000000000000"),
        (0.1, "3fb999999999999a"),
        (1.5, "3ff8000000000000"),
        (3.0, "4008000000000000"),
        (1_700_000_000_000, "4278bcfe56800000"),
        (2_147_483_647, "41dfffffffc00000"),
        (9_007_199_254_740_992, "4340000000000000"),
        (1e300, "7e37e43c8800759c"),
        (1.7976931348623157e308, "7fefffffffffffff"),
        (2.2250738585072014e-308, "0010000000000000"),
        (Double.leastNonzeroMagnitude, "0000000000000001"),
        (3 * Double.leastNonzeroMagnitude, "0000000000000003"),
        (0.9999999999999999, "3fefffffffffffff"),
        (9_007_199_254_740_991, "4340000000000000"),  // bit pattern 433fffffffffffff
        (562_949_953_421_311, "430ffffffffffff8"),  // 2^49-1, bit pattern 42fffffffffffff0
        (4_503_599_627_370_495, "433fffffffffffff"),  // 2^52-1, bit pattern 432ffffffffffffe
        (1e-300, "01a0000000000000"),  // bit pattern 01a56e1fc2f8f359
        (9.332636185032189e-302, "0160000000000000"),  // 2^-1000, bit pattern 0170000000000000
    ])
    func numberHexFollowsTheJSClient(value: Double, hex: String) {
        #expect(DataHash.numberHex(value) == hex)
    }

    @Test func numberHexEqualsBitPatternForOrdinaryValues() {
        for value in [0.5, 42, -123.456, 1e-10, 6.02214076e23, 12345.6789, -1e-5] {
            let digits = String(value.bitPattern, radix: 16)
            #expect(DataHash.numberHex(value) == String(repeating: "0", count: 16 - digits.count) + digits)
        }
    }

    /// RFC 4648 §10 test vectors.
    @Test func base64() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=",
                       "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(DataHash.base64(Array(plain.utf8)) == encoded)
        }
        #expect(DataHash.base64([0xFB, 0xFF, 0xBF]) == "+/+/")
        #expect(DataHash.base64(Array(repeating: 0, count: 20)).count == 28)
    }
}
