extension RuleSet {
    /// May `auth` apply these writes? Each (path, value) replaces the value at that path (`.null`
    /// deletes); a `set` is one entry, an `update` one entry per key. Server values must already be
    /// resolved. All rules see one merged post-write tree (an overlay on `root`, not a copy); every
    /// entry needs a `.write` grant on its path and passes all applicable `.validate` rules, or the
    /// whole batch is denied (spec §2.3–§2.5).
    public func canWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> RuleDecision {
        canWrite(writes, root: root, auth: auth, now: now, recorder: nil)
    }

    /// `canWrite`, adding to `readSet` what the decision read from `root` (see `ReadSet` and
    /// `ReadRecorder`): the same decision holds on any tree that differs from `root` only by writes
    /// that do not conflict with those reads. Only data reads: callers add `VirtualPaths.rules`.
    public func canWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64,
                         recording readSet: inout ReadSet) -> RuleDecision {
        ReadRecorder.recording(into: &readSet) { canWrite(writes, root: root, auth: auth, now: now, recorder: $0) }
    }

    private func canWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64, recorder: ReadRecorder?) -> RuleDecision {
        var normalized: [([String], Node)] = []
        normalized.reserveCapacity(writes.count)
        for (path, value) in writes {
            var segments = path.segments
            var node = value
            if segments.last == ".priority" {
                // A priority write is a write of the parent with a new priority.
                segments.removeLast()
                // The written value is the stored one with a new priority: it copies the stored subtree.
                recorder?.recordStored(segments, .subtree)
                let current = TreeView(root: root, writes: WriteOverlay(normalized)).descendant(segments)
                node = current.materialize().withPriority(value.leafValue.flatMap(Priority.init(leaf:)))
            }
            normalized.append((segments, node))
        }
        let overlay = WriteOverlay(normalized)
        recorder?.writes = overlay
        let oldRoot = TreeView(node: root)
        let newRoot = TreeView(root: root, writes: overlay)
        var context = EvaluationContext(
            auth: Self.authValue(auth), now: Double(now), query: .none, root: oldRoot, newRoot: newRoot,
            path: [], depth: 0, data: oldRoot, newData: newRoot, bindings: [], recorder: recorder.map(Unmanaged.passUnretained))
        var grants: [String] = []
        for (segments, _) in normalized {
            switch check(segments, &context, oldRoot: oldRoot, newRoot: newRoot) {
            case .success(let grantedBy): grants.append(grantedBy)
            case .failure(let denial): return RuleDecision(allowed: false, reason: denial.reason)
            }
        }
        if grants.count == 1 { return RuleDecision(allowed: true, reason: grants[0]) }
        if Set(grants).count == 1 { return RuleDecision(allowed: true, reason: grants[0]) }
        return RuleDecision(allowed: true, reason: grants.isEmpty ? "empty update" : grants.joined(separator: "; "))
    }

    private struct Denial: Error {
        var reason: String
    }

    private static func describe(_ segments: [String], upTo depth: Int) -> String {
        "/" + segments.prefix(depth).joined(separator: "/")
    }

    /// Grant walk plus validation for one written path.
    private func check(_ segments: [String], _ context: inout EvaluationContext, oldRoot: TreeView,
                       newRoot: TreeView) -> Result<String, Denial> {
        context.path = segments
        context.depth = 0
        context.data = oldRoot
        context.newData = newRoot
        context.bindings.removeAll(keepingCapacity: true)
        var node = self.root
        var grantedBy: String?
        var failures: [String] = []
        var reachedTarget = false
        var dataDepth = 0
        var newDataDepth = 0
        while true {
            let depth = context.depth
            let write = grantedBy == nil ? node.write : nil
            if write?.usesData == true || node.validate?.usesData == true, dataDepth < depth {
                context.data = context.data.descendant(segments[dataDepth..<depth])
                dataDepth = depth
            }
            if write?.usesNewData == true || node.validate != nil, newDataDepth < depth {
                context.newData = context.newData.descendant(segments[newDataDepth..<depth])
                newDataDepth = depth
            }
            if let rule = write {
                switch Self.run(rule, context) {
                case .success(true): grantedBy = rule.grantReason
                case .success(false): failures.append(rule.rulePath + " is false")
                case .failure(let error): failures.append(rule.rulePath + " failed: " + error.reason)
                }
            }
            if let rule = node.validate {
                // Whether it runs depends on whether newData exists here.
                if context.recorder != nil { context.recordNewData(segments, count: depth, .shape) }
                if context.newData.exists, let failure = Self.validate(rule, context) {
                    return .failure(Denial(reason: "write denied at \(Self.describe(segments, upTo: segments.count)): \(failure)"))
                }
            }
            if depth == segments.count {
                reachedTarget = true
                break
            }
            let key = segments[depth]
            guard let next = node.child(key) else { break }
            if next.binds { context.bindings.append(key) }
            context.depth = depth + 1
            node = next.node
        }
        if reachedTarget, node.validatesBelow {
            context.data = context.data.descendant(segments[dataDepth...])
            context.newData = context.newData.descendant(segments[newDataDepth...])
        }
        guard let grantedBy else {
            let detail = failures.isEmpty ? "no .write rule applies" : failures.joined(separator: "; ")
            return .failure(Denial(reason: "write denied at \(Self.describe(segments, upTo: segments.count)): \(detail)"))
        }
        if reachedTarget, node.validatesBelow {
            // Which descendants are validated depends on the written value (read as newData).
            if context.recorder != nil { context.recordNewData(segments, count: segments.count, .subtree) }
        }
        if reachedTarget, node.validatesBelow, context.newData.exists {
            var path = segments
            if let failure = validateDescendants(node, &context, path: &path) {
                return .failure(Denial(reason: "write denied at \(Self.describe(segments, upTo: segments.count)): \(failure)"))
            }
        }
        return .success(grantedBy)
    }

    /// nil when the rule passes, else why it failed.
    private static func validate(_ rule: CompiledRule, _ context: EvaluationContext) -> String? {
        switch run(rule, context) {
        case .success(true): return nil
        case .success(false): return "\(rule.rulePath) is false at \(describe(context.path, upTo: context.depth))"
        case .failure(let error):
            return "\(rule.rulePath) failed at \(describe(context.path, upTo: context.depth)): \(error.reason)"
        }
    }

    /// Validates every existing location below the context's location that has a rule node.
    private func validateDescendants(_ node: RuleNode, _ context: inout EvaluationContext, path: inout [String]) -> String? {
        let saved = (data: context.data, newData: context.newData, depth: context.depth, bindings: context.bindings.count)
        defer {
            context.data = saved.data
            context.newData = saved.newData
            context.depth = saved.depth
            context.bindings.removeLast(context.bindings.count - saved.bindings)
            path.removeLast(path.count - saved.depth)
            context.path = path
        }
        func visit(_ key: String, _ childNode: RuleNode, binds: Bool, _ newChild: TreeView) -> String? {
            guard childNode.validate != nil || childNode.validatesBelow else { return nil }
            path.removeLast(path.count - saved.depth)
            path.append(key)
            context.path = path
            context.depth = saved.depth + 1
            context.bindings.removeLast(context.bindings.count - saved.bindings)
            if binds { context.bindings.append(key) }
            context.data = saved.data.child(key)
            context.newData = newChild
            if let rule = childNode.validate, let failure = Self.validate(rule, context) { return failure }
            if childNode.validatesBelow { return validateDescendants(childNode, &context, path: &path) }
            return nil
        }
        let newData = saved.newData
        if let wildcard = node.wildcard {
            var failure: String?
            newData.forEachChild { key, child in
                if let literal = node.children[key] {
                    failure = visit(key, literal, binds: false, child)
                } else {
                    failure = visit(key, wildcard, binds: true, child)
                }
                return failure == nil
            }
            return failure
        }
        for (key, childNode) in node.children where childNode.validate != nil || childNode.validatesBelow {
            let child = newData.child(key)
            guard child.exists else { continue }
            if let failure = visit(key, childNode, binds: false, child) { return failure }
        }
        return nil
    }
}
