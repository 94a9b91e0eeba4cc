/// A run-time failure inside a rule: the whole rule counts as false (spec §3.5).
struct RuleRuntimeError: Error {
    var reason: String
}

/// Everything a rule can see while it runs.
struct EvaluationContext {
    var auth: RuleValue
    var now: Double
    var query: RuleQuery
    /// The pre-operation tree.
    var root: TreeView
    /// The post-operation tree (writes only).
    var newRoot: TreeView?
    /// The rule location: the first `depth` segments of `path`.
    var path: [String]
    var depth: Int
    var data: TreeView
    var newData: TreeView
    var bindings: [String]
    /// Set only when the caller wants the read set (`ReadRecorder`), which it keeps alive for the
    /// whole evaluation. A plain pointer: testing it, and copying the context, count no references.
    var recorder: Unmanaged<ReadRecorder>?

    /// Records a read (only called when `recorder != nil`; never inlined into the hot path).
    @inline(never)
    func record(_ snapshot: RuleSnapshot, _ read: ReadRecorder.Read, relative: String? = nil) {
        recorder?.takeUnretainedValue().record(snapshot, read, relative: relative)
    }

    /// Records a `newData` read at the first `count` keys of `path`.
    @inline(never)
    func recordNewData(_ path: [String], count: Int, _ read: ReadRecorder.Read) {
        recorder?.takeUnretainedValue().record(path, count: count, isNew: true, read)
    }

    func snapshot(_ view: TreeView, isNew: Bool) -> RuleSnapshot {
        RuleSnapshot(view: view, isNew: isNew, base: path, baseCount: depth, extra: [])
    }

    /// Evaluates a rule; any runtime error makes it false.
    func evaluate(_ rule: CompiledExpression) -> Result<Bool, RuleRuntimeError> {
        do {
            if case .bool(let b) = try eval(rule) { return .success(b) }
            return .failure(RuleRuntimeError(reason: "rule did not produce a boolean"))
        } catch {
            return .failure(error)
        }
    }

    func eval(_ e: CompiledExpression) throws(RuleRuntimeError) -> RuleValue {
        switch e {
        case .constant(let c): return RuleValue(c)
        case .variable(let v):
            switch v {
            case .auth: return auth
            case .now: return .number(now)
            case .root, .data, .newData: return .snapshot(SnapshotBox(try snapshotValue(e)))
            case .query: return .query
            }
        case .wildcard(let i): return .string(bindings[i])
        case .not(let inner): return .bool(!(try boolean(inner)))
        case .negate(let inner):
            guard case .number(let n) = try eval(inner) else { throw RuleRuntimeError(reason: "unary '-' on a non-number") }
            return .number(-n)
        case .and(let l, let r): return .bool(try boolean(l) ? try boolean(r) : false)
        case .or(let l, let r): return .bool(try boolean(l) ? true : try boolean(r))
        case .conditional(let t, let a, let b): return try boolean(t) ? try eval(a) : try eval(b)
        case .arithmetic(let op, let l, let r): return try RuleOperators.arithmetic(op, try eval(l), try eval(r))
        case .equals(let l, let r, let negated):
            return .bool(try RuleOperators.equal(try eval(l), try eval(r)) != negated)
        case .compare(let op, let l, let r): return .bool(try RuleOperators.compare(op, try eval(l), try eval(r)))
        case .member(let target, let name): return try RuleOperators.member(try eval(target), key: .string(name))
        case .computedMember(let target, let key): return try RuleOperators.member(try eval(target), key: try eval(key))
        case .stringLength(let target):
            guard case .string(let s) = try eval(target) else { throw RuleRuntimeError(reason: "length of a non-string") }
            return .number(Double(s.utf16.count))
        case .queryField(let target, let field):
            guard case .query = try eval(target) else { throw RuleRuntimeError(reason: "not a query") }
            return RuleOperators.queryField(query, field)
        case .snapshotCall(let method, let target, let args): return try snapshotCall(method, target, args)
        case .untrackedChild: return .snapshot(SnapshotBox(try snapshotValue(e)))
        case .hasChildrenList(let target, let elements):
            let snap = try snapshotValue(target)
            for element in elements {
                guard case .string(let key) = try eval(element) else {
                    throw RuleRuntimeError(reason: "hasChildren() with a non-string name")
                }
                if recorder != nil { record(snap, .shape, relative: key) }
                if !Self.childView(snap.view, key).exists { return .bool(false) }
            }
            return .bool(true)
        case .stringCall(let method, let target, let args):
            guard case .string(let s) = try eval(target) else {
                throw RuleRuntimeError(reason: "\(method.rawValue)() called on a non-string")
            }
            var values: [RuleValue] = []
            for arg in args { values.append(try eval(arg)) }
            return try RuleOperators.stringCall(method, s, values)
        }
    }

    private func boolean(_ e: CompiledExpression) throws(RuleRuntimeError) -> Bool {
        guard case .bool(let b) = try eval(e) else { throw RuleRuntimeError(reason: "expected a boolean") }
        return b
    }

    /// Evaluates a snapshot-typed expression without boxing the common chains
    /// (`data`, `newData.child('a').parent()`, …).
    private func snapshotValue(_ e: CompiledExpression) throws(RuleRuntimeError) -> RuleSnapshot {
        switch e {
        case .variable(.root): return RuleSnapshot(view: root, isNew: false, base: [], baseCount: 0, extra: [])
        case .variable(.data): return snapshot(data, isNew: false)
        case .variable(.newData): return snapshot(newData, isNew: true)
        case .snapshotCall(.child, let target, let args):
            return child(try snapshotValue(target), try stringArgument(args[0], "child"))
        case .untrackedChild(let target, let arg):
            var snap = try snapshotValue(target)
            // A recorder needs the location, which `child` tracks.
            if recorder != nil { return child(snap, try stringArgument(arg, "child")) }
            snap.view = Self.childView(snap.view, try stringArgument(arg, "child"))
            return snap
        case .snapshotCall(.parent, let target, _):
            return try parent(try snapshotValue(target))
        default:
            guard case .snapshot(let box) = try eval(e) else { throw RuleRuntimeError(reason: "not a RuleDataSnapshot") }
            return box.snapshot
        }
    }

    private func parent(_ snap: RuleSnapshot) throws(RuleRuntimeError) -> RuleSnapshot {
        var segments = snap.segments
        guard !segments.isEmpty else { throw RuleRuntimeError(reason: "parent() of the root") }
        segments.removeLast()
        let top = snap.isNew ? (newRoot ?? root) : root
        return RuleSnapshot(view: top.descendant(segments), isNew: snap.isNew, base: segments,
                            baseCount: segments.count, extra: [])
    }

    private func stringArgument(_ e: CompiledExpression, _ method: String) throws(RuleRuntimeError) -> String {
        guard case .string(let s) = try eval(e) else { throw RuleRuntimeError(reason: "\(method)() needs a string argument") }
        return s
    }

    /// The view at a relative `path` (see `child`), without tracking the location.
    static func childView(_ view: TreeView, _ path: String) -> TreeView {
        if path.isEmpty { return .empty }
        if !path.utf8.contains(UInt8(ascii: "/")) { return view.child(path) }
        var result = view
        for piece in path.split(separator: "/", omittingEmptySubsequences: true) {
            result = result.child(String(piece))
        }
        return result
    }

    /// `child(path)`: `path` may hold several `/`-separated keys; "" is a location that never exists.
    func child(_ snap: RuleSnapshot, _ path: String) -> RuleSnapshot {
        var result = snap
        if path.isEmpty {
            result.view = .empty
            result.extra.append("")
            return result
        }
        if !path.utf8.contains(UInt8(ascii: "/")) {
            result.view = snap.view.child(path)
            result.extra.append(path)
            return result
        }
        for piece in path.split(separator: "/", omittingEmptySubsequences: true) {
            let key = String(piece)
            result.view = result.view.child(key)
            result.extra.append(key)
        }
        return result
    }

    private func snapshotCall(_ method: CompiledExpression.SnapshotMethod, _ target: CompiledExpression,
                              _ args: [CompiledExpression]) throws(RuleRuntimeError) -> RuleValue {
        let snap = try snapshotValue(target)
        if recorder != nil {
            switch method {
            case .child, .parent, .hasChild: break
            case .getPriority: record(snap, .priority)
            case .val, .hasChildren, .exists, .isNumber, .isString, .isBoolean: record(snap, .shape)
            }
        }
        switch method {
        case .val:
            if let leaf = snap.view.leaf { return RuleOperators.value(leaf) }
            return snap.view.exists ? .nonLeaf : .null
        case .child: return .snapshot(SnapshotBox(child(snap, try stringArgument(args[0], "child"))))
        case .hasChild:
            let path = try stringArgument(args[0], "hasChild")
            if recorder != nil { record(snap, .shape, relative: path) }
            return .bool(Self.childView(snap.view, path).exists)
        case .parent: return .snapshot(SnapshotBox(try parent(snap)))
        case .hasChildren: return .bool(snap.view.hasChildren)
        case .exists: return .bool(snap.view.exists)
        case .getPriority:
            switch snap.view.priority {
            case .number(let n)?: return .number(n)
            case .string(let s)?: return .string(s)
            case nil: return .null
            }
        case .isNumber:
            if case .number? = snap.view.leaf { return .bool(true) }
            return .bool(false)
        case .isString:
            if case .string? = snap.view.leaf { return .bool(true) }
            return .bool(false)
        case .isBoolean:
            if case .bool? = snap.view.leaf { return .bool(true) }
            return .bool(false)
        }
    }
}
