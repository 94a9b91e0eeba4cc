extension RuleSet {
    /// Whether `auth` could be allowed to write at `path` with some value, judged before the value
    /// is known (a REST request whose body has not arrived): false only when no `.write` rule on
    /// the way from the root to `path` can grant it whatever the value, and, when the write may
    /// reach below `path` (`below`: a PATCH or POST), no rule under `path` has a `.write` at all.
    ///
    /// A `.write` that reads `newData` counts as possible (only the value decides); one that does
    /// not is evaluated as it will be (same `auth`, `data`, `root`, `now`, wildcards). The full
    /// check (`canWrite`) still runs once the value is in: this only refuses early what it would
    /// refuse anyway.
    public func mightAllowWrite(at path: Path, below: Bool, root: Node, auth: JSON?, now: Int64) -> Bool {
        var segments = path.segments
        if segments.last == ".priority" { segments.removeLast() }
        let view = TreeView(node: root)
        var context = EvaluationContext(
            auth: Self.authValue(auth), now: Double(now), query: .none, root: view, newRoot: view,
            path: segments, depth: 0, data: view, newData: view, bindings: [])
        var node = self.root
        var depth = 0
        while true {
            if let rule = node.write {
                if rule.usesNewData { return true }
                context.depth = depth
                context.data = view.descendant(segments[0..<depth])
                context.newData = context.data
                if case .success(true) = Self.run(rule, context) { return true }
            }
            if depth == segments.count { return below && Self.hasWrite(below: node) }
            guard let next = node.child(segments[depth]) else { return false }
            if next.binds { context.bindings.append(segments[depth]) }
            node = next.node
            depth += 1
        }
    }

    /// Whether some rule node strictly below `node` has a `.write`.
    private static func hasWrite(below node: RuleNode) -> Bool {
        for child in node.children.values where child.write != nil || hasWrite(below: child) { return true }
        if let wildcard = node.wildcard { return wildcard.write != nil || hasWrite(below: wildcard) }
        return false
    }
}
