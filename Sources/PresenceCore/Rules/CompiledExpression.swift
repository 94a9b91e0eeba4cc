/// A type-checked rule expression, ready to evaluate (built once at load time).
indirect enum CompiledExpression: Sendable {
    enum Variable: Sendable { case auth, now, root, data, newData, query }
    enum Arithmetic: Sendable { case add, subtract, multiply, divide, remainder }
    enum Comparison: Sendable { case less, lessOrEqual, greater, greaterOrEqual }
    enum QueryField: String, Sendable, CaseIterable {
        case orderByKey, orderByValue, orderByPriority, orderByChild
        case startAt, endAt, equalTo, limitToFirst, limitToLast
    }
    enum SnapshotMethod: String, Sendable {
        case val, child, parent, hasChild, hasChildren, exists, getPriority, isNumber, isString, isBoolean
    }
    enum StringMethod: String, Sendable {
        case contains, beginsWith, endsWith, replace, toLowerCase, toUpperCase, matches
    }

    case constant(RuleConstant)
    case variable(Variable)
    /// The i-th `$` capture in scope, counted from the root.
    case wildcard(Int)
    case not(CompiledExpression)
    case negate(CompiledExpression)
    case and(CompiledExpression, CompiledExpression)
    case or(CompiledExpression, CompiledExpression)
    case conditional(CompiledExpression, CompiledExpression, CompiledExpression)
    case arithmetic(Arithmetic, CompiledExpression, CompiledExpression)
    case equals(CompiledExpression, CompiledExpression, negated: Bool)
    case compare(Comparison, CompiledExpression, CompiledExpression)
    /// Property of a dynamic value (auth, auth.token…): never an error except `.length` on a non-string.
    case member(CompiledExpression, name: String)
    case computedMember(CompiledExpression, key: CompiledExpression)
    /// `.length` of a value statically known (or assumed) to be a string.
    case stringLength(CompiledExpression)
    case queryField(CompiledExpression, QueryField)
    case snapshotCall(SnapshotMethod, CompiledExpression, [CompiledExpression])
    /// `hasChildren([...])` with the array literal's elements.
    case hasChildrenList(CompiledExpression, [CompiledExpression])
    case stringCall(StringMethod, CompiledExpression, [CompiledExpression])
    /// `child()` in a rule that never calls `parent()`: the location path need not be tracked.
    case untrackedChild(CompiledExpression, CompiledExpression)
}

extension CompiledExpression {
    /// Applies `transform` to every direct subexpression.
    func mapChildren(_ transform: (CompiledExpression) -> CompiledExpression) -> CompiledExpression {
        switch self {
        case .constant, .variable, .wildcard: return self
        case .not(let e): return .not(transform(e))
        case .negate(let e): return .negate(transform(e))
        case .and(let l, let r): return .and(transform(l), transform(r))
        case .or(let l, let r): return .or(transform(l), transform(r))
        case .conditional(let t, let a, let b): return .conditional(transform(t), transform(a), transform(b))
        case .arithmetic(let op, let l, let r): return .arithmetic(op, transform(l), transform(r))
        case .equals(let l, let r, let negated): return .equals(transform(l), transform(r), negated: negated)
        case .compare(let op, let l, let r): return .compare(op, transform(l), transform(r))
        case .member(let e, let name): return .member(transform(e), name: name)
        case .computedMember(let e, let key): return .computedMember(transform(e), key: transform(key))
        case .stringLength(let e): return .stringLength(transform(e))
        case .queryField(let e, let field): return .queryField(transform(e), field)
        case .snapshotCall(let m, let e, let args): return .snapshotCall(m, transform(e), args.map(transform))
        case .hasChildrenList(let e, let args): return .hasChildrenList(transform(e), args.map(transform))
        case .stringCall(let m, let e, let args): return .stringCall(m, transform(e), args.map(transform))
        case .untrackedChild(let e, let arg): return .untrackedChild(transform(e), transform(arg))
        }
    }

    /// True when this expression or a subexpression satisfies `predicate`.
    func contains(where predicate: (CompiledExpression) -> Bool) -> Bool {
        if predicate(self) { return true }
        var found = false
        _ = mapChildren { child in
            if !found, child.contains(where: predicate) { found = true }
            return child
        }
        return found
    }

    var callsParent: Bool {
        contains { if case .snapshotCall(.parent, _, _) = $0 { return true } else { return false } }
    }

    func references(_ variable: Variable) -> Bool {
        contains { if case .variable(let v) = $0 { return v == variable } else { return false } }
    }

    /// Replaces path-tracking `child()` calls by `untrackedChild` (only valid without `parent()`).
    func withoutPathTracking() -> CompiledExpression {
        if case .snapshotCall(.child, let target, let args) = self {
            return .untrackedChild(target.withoutPathTracking(), args[0].withoutPathTracking())
        }
        return mapChildren { $0.withoutPathTracking() }
    }
}

/// A literal in a compiled expression.
enum RuleConstant: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case regex(RuleRegex)
}
