import PresenceCore

/// The rules language, parser and evaluator: `rules NUL data NUL auth NUL path NUL newData`.
/// The rules text is loaded as a document and also compiled as a lone expression (a limits-file
/// condition); a document that loads is evaluated for a read (with and without a query) and a
/// write of `newData` at `path` over `data`, as `auth`.
///
/// Invariants: nothing traps or hangs (libFuzzer's -timeout); evaluation is deterministic (the
/// same decision twice); a write the rules allow stores a valid tree.
enum RulesFuzzing {
    static let target = FuzzTarget(
        name: "rules",
        summary: "rules text NUL data NUL auth NUL path NUL newData → RuleSet.load / RuleCondition → canRead, canWrite; deterministic, terminates",
        run: run)

    static func run(_ bytes: [UInt8]) {
        let input = FuzzInput(bytes, parts: 5)
        let text = input.text(0)
        if let condition = try? RuleCondition(text, file: "fuzz", location: "/when") {
            let first = condition.evaluate(auth: nil, root: .null, now: FuzzWorld.now)
            invariant(first == condition.evaluate(auth: nil, root: .null, now: FuzzWorld.now), "a condition evaluated twice disagrees")
        }
        guard let rules = try? RuleSet.load(text: text, source: "fuzz") else { return }
        let root = (try? JSONParser.parse(bytes: input[1])).flatMap { try? Node(json: $0) } ?? .null
        let auth = try? JSONParser.parse(bytes: input[2])
        let path = (try? Path(input.text(3))) ?? .root
        let read = rules.canRead(path, root: root, auth: auth, now: FuzzWorld.now)
        invariant(read == rules.canRead(path, root: root, auth: auth, now: FuzzWorld.now), "a read evaluated twice disagrees")
        let query = RuleQuery(orderBy: .child("a"), startAt: .number(1), limitToFirst: 3)
        _ = rules.canRead(path, root: root, auth: auth, now: FuzzWorld.now, query: query)
        guard let newData = (try? JSONParser.parse(bytes: input[4])).flatMap({ try? Node(json: $0, at: path) }) else { return }
        let write = rules.canWrite([(path, newData)], root: root, auth: auth, now: FuzzWorld.now)
        invariant(write == rules.canWrite([(path, newData)], root: root, auth: auth, now: FuzzWorld.now), "a write evaluated twice disagrees")
        if write.allowed {
            var written = root
            written.set(newData, at: path)
            FuzzWorld.checkTree(written)
        }
    }
}
