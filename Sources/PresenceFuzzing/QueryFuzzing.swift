import PresenceCore

/// Query parameters: `wire q object NUL REST parameters (k=v&…)`. The wire part is parsed as a
/// `q` (`QuerySpec(wire:)`), the REST part as query parameters (`QuerySpec(rest:)`); each query
/// that parses is applied to a fixed tree and checked by the rules as a read.
///
/// Invariants: nothing traps; a parsed wire query survives its own wire object (same spec, same
/// identity); a query's result holds only children of the location and at most `limit` of them;
/// the engine's answer (its one-pass window, under the read budget) is the same result.
enum QueryFuzzing {
    static let target = FuzzTarget(
        name: "query",
        summary: "wire q JSON NUL REST k=v&… → QuerySpec(wire:), QuerySpec(rest:) → apply, engine read, rules; wire round trip, results within the limit",
        run: run)

    // swiftlint:disable:next force_try
    static let treeJSON = try! JSONParser.parse("""
        {"a": {"n": 3, ".priority": 2}, "b": {"n": "x"}, "c": 5, "d": true, "e": {"n": {"deep": 1}}, "1": -1.5,
         "10": {".value": "z", ".priority": "p"}, "f": null, "g": 1.7976931348623157e308, "h": [1, 2, 3]}
        """)
    // swiftlint:disable:next force_try
    static let tree = try! Node(json: treeJSON)

    static func run(_ bytes: [UInt8]) {
        let input = FuzzInput(bytes, parts: 2)
        if let json = try? JSONParser.parse(bytes: input[0]), let spec = try? QuerySpec(wire: json) {
            guard let again = try? QuerySpec(wire: spec.wireObject) else {
                return invariant(false, "a query's own wire object does not parse: \(spec.identity)")
            }
            invariant(again == spec && again.identity == spec.identity, "wire round trip changed \(spec.identity) into \(again.identity)")
            check(spec)
        }
        var parameters: [String: String] = [:]
        for item in input.text(1).split(separator: "&") {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            parameters[String(pair[0])] = pair.count > 1 ? String(pair[1]) : ""
        }
        if let spec = try? QuerySpec(rest: parameters) { check(spec) }
    }

    static func check(_ spec: QuerySpec) {
        let result = spec.apply(to: tree)
        for key in result.children.keys {
            invariant(tree.children[key] != nil, "a query result holds \(ClientInput.quoted(key)), not a child of the location")
        }
        if let limit = spec.limit {
            invariant(result.children.count <= limit.count, "a query with limit \(limit.count) returned \(result.children.count) children")
        }
        let engine = FuzzWorld.engine()
        _ = engine.write(.set(treeJSON), at: .root, namespace: "fuzz", credentials: .admin, now: FuzzWorld.now)
        if case .success(let answer) = engine.read(.root, namespace: "fuzz", credentials: .admin, now: FuzzWorld.now, query: spec) {
            invariant(answer == result, "the engine answered \(spec.identity) unlike QuerySpec.apply")
        }
        _ = FuzzWorld.rules.allowsRead(try! Path("/scores"), root: tree, auth: nil, now: FuzzWorld.now, query: spec)
    }
}
