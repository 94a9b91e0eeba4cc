import PresenceCore
import PresenceTesting

/// Random rules documents, trees and operations over a small key space, for the read-set
/// soundness check: rule shapes that read `data`, `root` and `newData` through `child()` (literal,
/// `$wildcard`, `auth.uid` and computed keys), `parent()`, `exists()`, `val()`, `hasChild()`,
/// `hasChildren()` with and without names, the type tests and `getPriority()`, mixed with `auth`
/// and combined with `!`, `&&`, `||` and `?:`.
struct RandomRules {
    var random: SeededRandom
    let keys = ["a", "b", "c", "alice"]

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }

    /// A case whose rules load (generation retries until they do).
    mutating func decisionCase(_ index: Int) -> DecisionCase {
        while true {
            let text = #"{"rules":"# + ruleNode(depth: 0, scope: []) + "}"
            guard let rules = try? RuleSet.load(text: text, source: "random") else { continue }
            let root = tree(depth: 0)
            let auth: JSON? = pick([nil, ["uid": "alice"], ["uid": "a", "token": ["admin": true]]])
            let operation: DecisionCase.Operation
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3: operation = .read(path(maxDepth: 3), nil)
            case 3..<7: operation = .write([write(at: path(maxDepth: 3))])
            default:
                let base = path(maxDepth: 2)
                var writes: [(Path, Node)] = []
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    writes.append(write(at: base.appending(path(maxDepth: 2, minDepth: 1))))
                }
                operation = .write(writes)
            }
            return DecisionCase(name: "random #\(index): \(text)", rules: rules, root: root, auth: auth, now: 1000, operation: operation)
        }
    }

    mutating func write(at path: Path) -> (Path, Node) {
        if chance(4) { return (path.child(".priority"), Node(.number(2))) }
        if chance(30) { return (path, .null) }
        return (path, ReadSetHarness.value(keys: keys, depth: 1, using: &random).withPriority(nil))
    }

    mutating func path(maxDepth: Int, minDepth: Int = 0) -> Path {
        Path(validated: (0..<Int.random(in: minDepth...maxDepth, using: &random)).map { _ in pick(keys) })
    }

    mutating func tree(depth: Int) -> Node {
        if depth == 3 || chance(depth == 0 ? 5 : 35) {
            let leaf: Leaf = pick([.number(0), .number(1), .string("a"), .string("alice"), .bool(true)])
            return chance(10) ? .leaf(leaf, priority: .number(1)) : Node(leaf)
        }
        var children: [String: Node] = [:]
        for key in keys where chance(55) {
            let child = tree(depth: depth + 1)
            if !child.isNull { children[key] = child }
        }
        return children.isEmpty ? .null : .branch(children, priority: chance(10) ? .string("p") : nil)
    }

    mutating func ruleNode(depth: Int, scope: [String]) -> String {
        var members: [String] = []
        for kind in [".read", ".write", ".validate"] where chance(45) {
            members.append("\"\(kind)\":\"" + boolean(depth: 0, scope: scope, newData: kind != ".read") + "\"")
        }
        if depth < 3 {
            for key in ["a", "b"] where chance(30) { members.append("\"\(key)\":" + ruleNode(depth: depth + 1, scope: scope)) }
            if chance(45) {
                let name = "$w\(depth)"
                members.append("\"\(name)\":" + ruleNode(depth: depth + 1, scope: scope + [name]))
            }
        }
        return "{" + members.joined(separator: ",") + "}"
    }

    mutating func boolean(depth: Int, scope: [String], newData: Bool) -> String {
        if depth < 2, chance(35) {
            let a = boolean(depth: depth + 1, scope: scope, newData: newData)
            let b = boolean(depth: depth + 1, scope: scope, newData: newData)
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return "!(\(a))"
            case 1: return "(\(a)) && (\(b))"
            case 2: return "(\(a)) || (\(b))"
            default: return "(\(a)) ? (\(b)) : (\(boolean(depth: depth + 1, scope: scope, newData: newData)))"
            }
        }
        let s = snapshot(depth: 0, scope: scope, newData: newData)
        switch Int.random(in: 0..<18, using: &random) {
        case 0: return s + ".exists()"
        case 1: return "!" + s + ".exists()"
        case 2: return s + ".hasChildren()"
        case 3: return s + ".hasChildren(['a', 'b'])"
        case 4: return s + ".hasChild('\(pick(keys))')"
        case 5: return s + ".isNumber()"
        case 6: return s + ".isString() || " + s + ".isBoolean()"
        case 7: return s + ".val() == " + pick(["1", "'a'", "true", "null", "'alice'"])
        case 8: return s + ".val() != null"
        case 9: return s + ".val() > 0"
        case 10: return s + ".val() == " + snapshot(depth: 0, scope: scope, newData: newData) + ".val()"
        case 11: return s + ".getPriority() == null"
        case 12: return "auth != null"
        case 13 where !scope.isEmpty: return "auth.uid == " + pick(scope)
        case 14 where !scope.isEmpty: return pick(scope) + " == 'a'"
        case 15: return "auth.uid == 'alice'"
        default: return s + ".exists()"
        }
    }

    mutating func snapshot(depth: Int, scope: [String], newData: Bool) -> String {
        var s = pick(newData ? ["data", "newData", "root", "newData"] : ["data", "root"])
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            switch Int.random(in: 0..<8, using: &random) {
            case 0, 1: s += ".child('\(pick(keys))')"
            case 2: s += ".child('a/b')"
            case 3 where !scope.isEmpty: s += ".child(\(pick(scope)))"
            case 4: s += ".child(auth.uid)"
            case 5: s += ".parent()"
            case 6 where depth == 0: s += ".child(" + snapshot(depth: 1, scope: scope, newData: newData) + ".val() + '')"
            default: s += ".child('\(pick(keys))')"
            }
        }
        return s
    }
}
