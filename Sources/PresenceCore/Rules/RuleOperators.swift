/// Run-time semantics of operators and built-in members (spec §3.4–§3.9).
enum RuleOperators {
    static func value(_ leaf: Leaf) -> RuleValue {
        switch leaf {
        case .bool(let b): return .bool(b)
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        }
    }

    static func arithmetic(_ op: CompiledExpression.Arithmetic, _ l: RuleValue, _ r: RuleValue) throws(RuleRuntimeError) -> RuleValue {
        if op == .add {
            switch (l, r) {
            case let (.number(a), .number(b)): return .number(a + b)
            case let (.string(a), .string(b)): return .string(a + b)
            case let (.string(a), .number(b)): return .string(a + JSNumberFormat.string(b))
            case let (.number(a), .string(b)): return .string(JSNumberFormat.string(a) + b)
            default: throw RuleRuntimeError(reason: "'+' on \(l.typeName) and \(r.typeName)")
            }
        }
        guard case .number(let a) = l, case .number(let b) = r else {
            throw RuleRuntimeError(reason: "arithmetic on \(l.typeName) and \(r.typeName)")
        }
        switch op {
        case .add: return .number(a + b)
        case .subtract: return .number(a - b)
        case .multiply: return .number(a * b)
        case .divide: return .number(b == 0 ? .nan : a / b)
        case .remainder: return .number(a.truncatingRemainder(dividingBy: b))
        }
    }

    /// Strict equality: no coercion, different types are unequal.
    static func equal(_ l: RuleValue, _ r: RuleValue) throws(RuleRuntimeError) -> Bool {
        switch (l, r) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.json(a), .json(b)): return a == b
        case (.snapshot, _), (_, .snapshot), (.regex, _), (_, .regex), (.query, _), (_, .query):
            throw RuleRuntimeError(reason: "cannot compare \(l.typeName) with \(r.typeName)")
        default: return false
        }
    }

    static func compare(_ op: CompiledExpression.Comparison, _ l: RuleValue, _ r: RuleValue) throws(RuleRuntimeError) -> Bool {
        switch (l, r) {
        case let (.number(a), .number(b)):
            switch op {
            case .less: return a < b
            case .lessOrEqual: return a <= b
            case .greater: return a > b
            case .greaterOrEqual: return a >= b
            }
        case let (.string(a), .string(b)):
            let less = a.utf16.lexicographicallyPrecedes(b.utf16)
            let greater = b.utf16.lexicographicallyPrecedes(a.utf16)
            switch op {
            case .less: return less
            case .lessOrEqual: return !greater
            case .greater: return greater
            case .greaterOrEqual: return !less
            }
        default:
            throw RuleRuntimeError(reason: "cannot order \(l.typeName) and \(r.typeName)")
        }
    }

    /// Property lookup on a dynamic value (`auth…`): missing properties are null, never an error,
    /// except `.length` of something that has no length.
    static func member(_ target: RuleValue, key: RuleValue) throws(RuleRuntimeError) -> RuleValue {
        let name: String
        switch key {
        case .string(let s): name = s
        case .number(let n): name = JSNumberFormat.string(n)
        case .bool(let b): name = b ? "true" : "false"
        case .null: name = "null"
        default: throw RuleRuntimeError(reason: "invalid property key")
        }
        switch target {
        case .json(.object(let members)):
            guard let found = members.last(where: { $0.0 == name }) else { return .null }
            return RuleValue(found.1)
        case .json(.array(let elements)):
            if name == "length" { return .number(Double(elements.count)) }
            if let i = Int(name), i >= 0, i < elements.count, String(i) == name { return RuleValue(elements[i]) }
            return .null
        case .string(let s):
            return name == "length" ? .number(Double(s.utf16.count)) : .null
        case .null, .bool, .number:
            if name == "length" { throw RuleRuntimeError(reason: "length of \(target.typeName)") }
            return .null
        default:
            throw RuleRuntimeError(reason: "property access on \(target.typeName)")
        }
    }

    static func queryField(_ q: RuleQuery, _ field: CompiledExpression.QueryField) -> RuleValue {
        switch field {
        case .orderByKey:
            if q.orderBy == nil || q.orderBy == .key { return .bool(true) }
            return .bool(false)
        case .orderByValue: return .bool(q.orderBy == .value)
        case .orderByPriority: return .bool(q.orderBy == .priority)
        case .orderByChild:
            if case .child(let c)? = q.orderBy { return .string(c) }
            return .null
        case .startAt: return q.startAt.map { RuleValue($0) } ?? .null
        case .endAt: return q.endAt.map { RuleValue($0) } ?? .null
        case .equalTo: return q.equalTo.map { RuleValue($0) } ?? .null
        case .limitToFirst: return q.limitToFirst.map { .number(Double($0)) } ?? .null
        case .limitToLast: return q.limitToLast.map { .number(Double($0)) } ?? .null
        }
    }

    static func stringCall(_ method: CompiledExpression.StringMethod, _ s: String,
                           _ args: [RuleValue]) throws(RuleRuntimeError) -> RuleValue {
        func string(_ i: Int) throws(RuleRuntimeError) -> String {
            guard case .string(let a) = args[i] else {
                throw RuleRuntimeError(reason: "\(method.rawValue)() needs string arguments, got \(args[i].typeName)")
            }
            return a
        }
        switch method {
        case .contains: return .bool(JSStrings.contains(s, try string(0)))
        case .beginsWith: return .bool(s.utf8.starts(with: try string(0).utf8))
        case .endsWith: return .bool(JSStrings.hasSuffix(s, try string(0)))
        case .replace: return .string(JSStrings.replaceAll(s, try string(0), with: try string(1)))
        case .toLowerCase: return .string(s.lowercased())
        case .toUpperCase: return .string(s.uppercased())
        case .matches:
            guard case .regex(let regex) = args[0] else { throw RuleRuntimeError(reason: "matches() needs a regular expression") }
            return .bool(regex.matches(s))
        }
    }
}
