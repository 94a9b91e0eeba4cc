extension RuleSet {
    /// May `auth` read `path`? `auth` is the rules `auth` variable: nil means unauthenticated
    /// (`auth == null`), otherwise a JSON object like `{"uid":"alice","provider":"custom","token":{…}}`.
    /// Allowed iff some `.read` on the walk from the root to `path` is true (spec §2.2).
    public func canRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: RuleQuery? = nil) -> RuleDecision {
        canRead(path, root: root, auth: auth, now: now, query: query, recorder: nil)
    }

    /// `canRead`, adding to `readSet` what the decision read from `root` (see `ReadSet`).
    public func canRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: RuleQuery? = nil,
                        recording readSet: inout ReadSet) -> RuleDecision {
        ReadRecorder.recording(into: &readSet) { canRead(path, root: root, auth: auth, now: now, query: query, recorder: $0) }
    }

    private func canRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: RuleQuery?, recorder: ReadRecorder?) -> RuleDecision {
        let segments = path.segments
        let rootView = TreeView(node: root)
        var context = EvaluationContext(
            auth: Self.authValue(auth), now: Double(now), query: query ?? .none, root: rootView, newRoot: nil,
            path: segments, depth: 0, data: rootView, newData: .empty, bindings: [], recorder: recorder.map(Unmanaged.passUnretained))
        var node = self.root
        var failures: [String] = []
        var depth = 0
        var dataDepth = 0
        while true {
            if let rule = node.read {
                if rule.usesData, dataDepth < depth {
                    context.data = context.data.descendant(segments[dataDepth..<depth])
                    dataDepth = depth
                }
                switch Self.run(rule, context) {
                case .success(true): return RuleDecision(allowed: true, reason: rule.grantReason)
                case .success(false): failures.append(rule.rulePath + " is false")
                case .failure(let error): failures.append(rule.rulePath + " failed: " + error.reason)
                }
            }
            guard depth < segments.count, let next = node.child(segments[depth]) else { break }
            if next.binds { context.bindings.append(segments[depth]) }
            depth += 1
            context.depth = depth
            node = next.node
        }
        let detail = failures.isEmpty ? "no .read rule applies" : failures.joined(separator: "; ")
        return RuleDecision(allowed: false, reason: "read denied at \(path): \(detail)")
    }
}
