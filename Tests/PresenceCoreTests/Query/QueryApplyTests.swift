import Testing
@testable import PresenceCore

@Suite struct QueryApplyTests {
    typealias F = QueryFixture
    let height = QueryFixture.child("height")

    func start(_ value: QueryValue, _ name: String? = nil, inclusive: Bool = true) -> QueryBound {
        QueryBound(value: value, name: name, inclusive: inclusive)
    }

    // The Python Admin SDK's integration tests (TestAdvancedQueries), expected keys in order.

    @Test func limits() {
        #expect(F.keys(QuerySpec(index: height, limit: .first(2)), F.dinosaurs) == Array(F.heightSorted.prefix(2)))
        #expect(F.keys(QuerySpec(index: height, limit: .first(10)), F.dinosaurs) == F.heightSorted)
        #expect(F.keys(QuerySpec(index: height, limit: .last(2)), F.dinosaurs) == Array(F.heightSorted.suffix(2)))
        #expect(F.keys(QuerySpec(index: height, limit: .last(10)), F.dinosaurs) == F.heightSorted)
        #expect(F.keys(QuerySpec(index: .key, limit: .first(2)), F.dinosaurs) == ["bruhathkayosaurus", "lambeosaurus"])
    }

    @Test func ranges() {
        #expect(F.keys(QuerySpec(index: height, start: start(.number(3.5))), F.dinosaurs) == Array(F.heightSorted.suffix(2)))
        #expect(F.keys(QuerySpec(index: height, end: start(.number(3.5))), F.dinosaurs) == Array(F.heightSorted.prefix(4)))
        #expect(F.keys(QuerySpec(index: height, start: start(.number(2.5)), end: start(.number(5))), F.dinosaurs)
            == Array(F.heightSorted[3..<5]))
        let equal = start(.number(0.6))
        #expect(F.keys(QuerySpec(index: height, start: equal, end: equal), F.dinosaurs) == ["linhenykus", "pterodactyl"])
        let nested = QuerySpec(index: F.child("ratings/pos"), start: start(.number(4)))
        #expect(F.keys(nested, F.dinosaurs) == ["pterodactyl", "stegosaurus", "triceratops"])
    }

    @Test func keyIndexBounds() {
        let key = { (s: String, inclusive: Bool) in QueryBound(value: .string(s), inclusive: inclusive) }
        #expect(F.keys(QuerySpec(index: .key, start: key("l", true), end: key("p", true)), F.dinosaurs)
            == ["lambeosaurus", "linhenykus"])
        #expect(F.keys(QuerySpec(index: .key, start: key("lambeosaurus", false), limit: .first(2)), F.dinosaurs)
            == ["linhenykus", "pterodactyl"])
        #expect(F.keys(QuerySpec(index: .key, start: key("lambeosaurus", true), limit: .first(2)), F.dinosaurs)
            == ["lambeosaurus", "linhenykus"])
        #expect(F.keys(QuerySpec(index: .key, end: key("linhenykus", false)), F.dinosaurs)
            == ["bruhathkayosaurus", "lambeosaurus"])
        #expect(F.keys(QuerySpec(index: .key, end: key("linhenykus", true), limit: .last(1)), F.dinosaurs)
            == ["linhenykus"])
        let equal = key("stegosaurus", true)
        #expect(F.keys(QuerySpec(index: .key, start: equal, end: equal), F.dinosaurs) == ["stegosaurus"])
        // Integer-like keys come first in key order, so a string bound sits after them all.
        let mixed = F.node(#"{"1": 1, "10": 1, "2": 1, "a": 1, "b": 1}"#)
        #expect(F.keys(QuerySpec(index: .key, start: key("2", true)), mixed) == ["2", "10", "a", "b"])
        #expect(F.keys(QuerySpec(index: .key, end: key("10", false)), mixed) == ["1", "2"])
        #expect(F.keys(QuerySpec(index: .key, start: key("1.5", true)), mixed) == ["a", "b"])
    }

    @Test func valueIndexBoundsAndExclusiveBounds() {
        let value = { (n: Double) in QueryValue.number(n) }
        #expect(F.keys(QuerySpec(index: .value, start: start(value(21)), end: start(value(80))), F.scores)
            == ["lambeosaurus", "triceratops", "bruhathkayosaurus", "linhenykus"])
        #expect(F.keys(QuerySpec(index: .value, start: start(value(22), inclusive: false)), F.scores)
            == ["bruhathkayosaurus", "linhenykus", "pterodactyl"])
        #expect(F.keys(QuerySpec(index: .value, end: start(value(22), inclusive: false)), F.scores)
            == ["stegosaurus", "lambeosaurus"])
        #expect(F.keys(QuerySpec(index: .value, start: start(value(22), inclusive: false), end: start(value(93), inclusive: false)),
                       F.scores) == ["bruhathkayosaurus", "linhenykus"])
        #expect(F.keys(QuerySpec(index: .value, start: start(value(1000))), F.scores).isEmpty)
    }

    @Test func boundsWithNames() {
        let at = { (name: String?, inclusive: Bool) in QueryBound(value: .number(0.6), name: name, inclusive: inclusive) }
        // equalTo(0.6, "pterodactyl")
        #expect(F.keys(QuerySpec(index: height, start: at("pterodactyl", true), end: at("pterodactyl", true)), F.dinosaurs)
            == ["pterodactyl"])
        // startAt(0.6, "m"): past linhenykus, not past pterodactyl.
        #expect(F.keys(QuerySpec(index: height, start: at("m", true)), F.dinosaurs) == Array(F.heightSorted.dropFirst()))
        #expect(F.keys(QuerySpec(index: height, end: at("m", true)), F.dinosaurs) == ["linhenykus"])
        // startAfter(0.6, "linhenykus") / endBefore(0.6, "pterodactyl")
        #expect(F.keys(QuerySpec(index: height, start: at("linhenykus", false)), F.dinosaurs) == Array(F.heightSorted.dropFirst()))
        #expect(F.keys(QuerySpec(index: height, end: at("pterodactyl", false)), F.dinosaurs) == ["linhenykus"])
        // startAfter(0.6) as the JS SDK sends it (sn "[MAX_NAME]") and with no name: both skip every 0.6.
        #expect(F.keys(QuerySpec(index: height, start: at(QueryOrder.maxName, false)), F.dinosaurs)
            == Array(F.heightSorted.dropFirst(2)))
        #expect(F.keys(QuerySpec(index: height, start: at(nil, false)), F.dinosaurs) == Array(F.heightSorted.dropFirst(2)))
        // 8.x emulation: inclusive start with "[MAX_NAME]" means the same.
        #expect(F.keys(QuerySpec(index: height, start: at(QueryOrder.maxName, true)), F.dinosaurs)
            == Array(F.heightSorted.dropFirst(2)))
        // endBefore(0.6) with "[MIN_NAME]" and without a name, and endAt(0.6, "[MIN_NAME]").
        #expect(F.keys(QuerySpec(index: height, end: at(QueryOrder.minName, false)), F.dinosaurs).isEmpty)
        #expect(F.keys(QuerySpec(index: height, end: at(nil, false)), F.dinosaurs).isEmpty)
        #expect(F.keys(QuerySpec(index: height, end: at(QueryOrder.minName, true)), F.dinosaurs).isEmpty)
        #expect(F.keys(QuerySpec(index: height, start: at(QueryOrder.minName, true), end: at(QueryOrder.maxName, true)),
                       F.dinosaurs) == ["linhenykus", "pterodactyl"])
    }

    @Test func rangeThenLimit() {
        let spec = QuerySpec(index: height, start: start(.number(1)), limit: .first(2))
        #expect(F.keys(spec, F.dinosaurs) == ["lambeosaurus", "triceratops"])
        let last = QuerySpec(index: height, end: start(.number(4)), limit: .last(2))
        #expect(F.keys(last, F.dinosaurs) == ["triceratops", "stegosaurus"])
        let both = QuerySpec(index: height, start: start(.number(0.6)), end: start(.number(4)), limit: .last(3))
        #expect(F.keys(both, F.dinosaurs) == ["lambeosaurus", "triceratops", "stegosaurus"])
    }

    @Test func valueTypesAsBounds() {
        let node = F.node(#"{"a": false, "b": true, "c": 1, "d": "s", "e": {"x": 1}, "f": -5, "g": ""}"#)
        #expect(F.keys(QuerySpec(index: .value, start: start(.bool(true))), node) == ["b", "f", "c", "g", "d", "e"])
        #expect(F.keys(QuerySpec(index: .value, start: start(.string(""))), node) == ["g", "d", "e"])
        #expect(F.keys(QuerySpec(index: .value, end: start(.bool(false))), node) == ["a"])
        #expect(F.keys(QuerySpec(index: .value, start: start(.null)), node) == ["a", "b", "f", "c", "g", "d", "e"])
        #expect(F.keys(QuerySpec(index: .value, end: start(.null)), node).isEmpty)
        #expect(F.keys(QuerySpec(index: .value, end: start(.string("\u{FFFF}"))), node) == ["a", "b", "f", "c", "g", "d"])
        // Children without the indexed child sort as null.
        let sparse = F.node(#"{"a": {"h": 1}, "b": {"x": 1}, "c": {"h": null, "y": 2}}"#)
        let nulls = QuerySpec(index: F.child("h"), start: start(.null), end: start(.null))
        #expect(F.keys(nulls, sparse) == ["b", "c"])
    }

    @Test func priorityIndexBounds() {
        let node = F.node("""
            {"a": {".value": 1, ".priority": 1}, "b": {".value": 1, ".priority": 2}, "c": 1,
             "d": {".value": 1, ".priority": "x"}, "e": {"z": 1, ".priority": 1}}
            """)
        #expect(F.keys(QuerySpec(start: start(.number(1)), end: start(.number(1))), node) == ["a", "e"])
        #expect(F.keys(QuerySpec(start: start(.null), end: start(.null)), node) == ["c"])
        #expect(F.keys(QuerySpec(start: start(.string(""))), node) == ["d"])
        #expect(F.keys(QuerySpec(end: start(.number(1), "b")), node) == ["c", "a"])
        #expect(F.keys(QuerySpec(limit: .last(2)), node) == ["b", "d"])
    }

    @Test func applyBuildsTheFilteredBranch() {
        let node = F.node("""
            {"a": {".value": 3, ".priority": 7}, "b": 1, "c": 2, ".priority": "top"}
            """)
        let spec = QuerySpec(index: .value, limit: .last(2))
        #expect(spec.apply(to: node) == F.node(#"{"a": {".value": 3, ".priority": 7}, "c": 2}"#))
        #expect(spec.apply(to: node).priority == nil)
        // Unfiltered queries return the location unchanged, priority included.
        #expect(QuerySpec(index: .value).apply(to: node) == node)
        #expect(QuerySpec.default.apply(to: node) == node)
        // Nothing in range: null.
        #expect(QuerySpec(index: .value, start: start(.number(100))).apply(to: node) == .null)
    }

    @Test func leavesAndNull() {
        let leaf = Node.leaf(.string("x"), priority: .number(1))
        #expect(QuerySpec(index: .value, limit: .first(1)).apply(to: leaf) == .null)
        #expect(QuerySpec(index: .key, start: start(.string("a"))).apply(to: leaf) == .null)
        #expect(QuerySpec(index: .value).apply(to: leaf) == leaf)
        #expect(QuerySpec.default.apply(to: leaf) == leaf)
        #expect(QuerySpec(index: .value, limit: .first(1)).apply(to: .null) == .null)
        #expect(QuerySpec(index: .value, limit: .first(1)).window(of: leaf).isEmpty)
    }

    @Test func containsMatchesTheRangeOnly() {
        let spec = QuerySpec(index: height, start: start(.number(1)), end: start(.number(3)), limit: .first(1))
        #expect(spec.contains("triceratops", F.dinosaurs.child("triceratops")))
        #expect(spec.contains("lambeosaurus", F.dinosaurs.child("lambeosaurus")))
        #expect(!spec.contains("stegosaurus", F.dinosaurs.child("stegosaurus")))
        #expect(!spec.contains("linhenykus", F.dinosaurs.child("linhenykus")))
    }

    @Test func effectiveNames() {
        #expect(QuerySpec.effectiveName(of: QueryBound(value: .null), isStart: true) == QueryOrder.minName)
        #expect(QuerySpec.effectiveName(of: QueryBound(value: .null), isStart: false) == QueryOrder.maxName)
        #expect(QuerySpec.effectiveName(of: QueryBound(value: .null, inclusive: false), isStart: true) == QueryOrder.maxName)
        #expect(QuerySpec.effectiveName(of: QueryBound(value: .null, inclusive: false), isStart: false) == QueryOrder.minName)
        #expect(QuerySpec.effectiveName(of: QueryBound(value: .null, name: "k"), isStart: true) == "k")
    }
}
