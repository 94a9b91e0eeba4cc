/// Static typing of rule expressions (spec §1.4), producing `CompiledExpression`s.
///
/// Types follow the reference evaluator: values read from `auth` are `any`, `val()` results are
/// `primitive`; both are "fuzzy" and defer their checks to run time. Everything else is checked
/// here, and a rule whose type is not boolean is rejected.
struct ExpressionCompiler {
    enum StaticType: Equatable {
        case boolean, number, string, null, snapshot, query, any, primitive, regex, array
        case method  // a method reference that is not called

        var isFuzzy: Bool { self == .any || self == .primitive }
        var isPrimitive: Bool { [.string, .number, .boolean, .null, .primitive].contains(self) }
    }

    typealias Typed = (expression: CompiledExpression, type: StaticType)

    /// `$` names in scope, outermost first.
    let wildcards: [String]
    /// `.read` rules cannot see `newData`.
    let allowsNewData: Bool

    static func compile(_ source: String, wildcards: [String], allowsNewData: Bool) throws(ExpressionError) -> CompiledExpression {
        let syntax = try ExpressionParser.parse(source)
        let compiler = ExpressionCompiler(wildcards: wildcards, allowsNewData: allowsNewData)
        let typed = try compiler.compile(syntax)
        guard typed.type == .boolean else {
            throw ExpressionError(offset: syntax.offset, reason: "the rule must evaluate to a boolean, not \(describe(typed.type))")
        }
        return typed.expression.callsParent ? typed.expression : typed.expression.withoutPathTracking()
    }

    static func describe(_ type: StaticType) -> String {
        switch type {
        case .boolean: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .null: return "null"
        case .snapshot: return "a RuleDataSnapshot"
        case .query: return "a query"
        case .any, .primitive: return "a value of unknown type"
        case .regex: return "a regular expression"
        case .array: return "an array"
        case .method: return "a method (missing call parentheses?)"
        }
    }

    func compile(_ syntax: ExpressionSyntax) throws(ExpressionError) -> Typed {
        switch syntax {
        case .number(let n, _): return (.constant(.number(n)), .number)
        case .string(let s, _): return (.constant(.string(s)), .string)
        case .bool(let b, _): return (.constant(.bool(b)), .boolean)
        case .null: return (.constant(.null), .null)
        case .regex(let pattern, let flags, let at):
            do {
                return (.constant(.regex(try RuleRegex(pattern: pattern, flags: flags))), .regex)
            } catch {
                throw ExpressionError(offset: at + error.offset, reason: error.reason)
            }
        case .array(_, let at):
            throw ExpressionError(offset: at, reason: "array literals are only allowed as the argument of hasChildren()")
        case .identifier(let name, let at): return try identifier(name, at: at)
        case .member(let object, let name, let at):
            return try member(try compile(object), name: name, at: at)
        case .subscriptAccess(let object, let key, let at):
            let target = try compile(object)
            if target.type == .any {
                let k = try compile(key)
                guard k.type.isPrimitive || k.type == .any else {
                    throw ExpressionError(offset: key.offset, reason: "invalid property key: \(Self.describe(k.type))")
                }
                return (.computedMember(target.expression, key: k.expression), .any)
            }
            guard case .string(let name, _) = key else {
                throw ExpressionError(offset: key.offset, reason: "invalid property access: the key must be a string literal")
            }
            return try member(target, name: name, at: at)
        case .call(let callee, let arguments, let at): return try call(callee, arguments, at: at)
        case .unary(let op, let operand, let at):
            let typed = try compile(operand)
            if op == "!" {
                guard typed.type == .boolean else {
                    throw ExpressionError(offset: at, reason: "'!' needs a boolean operand, not \(Self.describe(typed.type))")
                }
                return (.not(typed.expression), .boolean)
            }
            guard typed.type == .number || typed.type.isFuzzy else {
                throw ExpressionError(offset: at, reason: "unary '-' needs a number operand, not \(Self.describe(typed.type))")
            }
            return (.negate(typed.expression), .number)
        case .binary(let op, let left, let right, let at):
            return try binary(op, try compile(left), try compile(right), at: at)
        case .conditional(let test, let consequent, let alternate, let at):
            let t = try compile(test)
            guard t.type == .boolean else {
                throw ExpressionError(offset: test.offset, reason: "the condition of '?:' must be a boolean, not \(Self.describe(t.type))")
            }
            let a = try compile(consequent)
            let b = try compile(alternate)
            guard a.type != .method, b.type != .method else {
                throw ExpressionError(offset: at, reason: "methods must be called")
            }
            let type: StaticType = a.type == b.type ? a.type : (a.type.isPrimitive && b.type.isPrimitive ? .primitive : .any)
            return (.conditional(t.expression, a.expression, b.expression), type)
        }
    }

    private func identifier(_ name: String, at: Int) throws(ExpressionError) -> Typed {
        switch name {
        case "auth": return (.variable(.auth), .any)
        case "now": return (.variable(.now), .number)
        case "root": return (.variable(.root), .snapshot)
        case "data": return (.variable(.data), .snapshot)
        case "query": return (.variable(.query), .query)
        case "newData":
            guard allowsNewData else {
                throw ExpressionError(offset: at, reason: "newData is not available in .read rules")
            }
            return (.variable(.newData), .snapshot)
        default:
            if name.hasPrefix("$") {
                guard let index = wildcards.lastIndex(of: name) else {
                    throw ExpressionError(offset: at, reason: "unknown variable \(name): no such wildcard on this rule's path")
                }
                return (.wildcard(index), .string)
            }
            throw ExpressionError(offset: at, reason: "unknown variable '\(name)'")
        }
    }

    static let snapshotMethods: Set<String> = [
        "val", "child", "parent", "hasChild", "hasChildren", "exists", "getPriority", "isNumber", "isString", "isBoolean",
    ]
    static let stringMethods: Set<String> = [
        "contains", "beginsWith", "endsWith", "replace", "toLowerCase", "toUpperCase", "matches",
    ]

    /// Property access (not called).
    private func member(_ target: Typed, name: String, at: Int) throws(ExpressionError) -> Typed {
        switch target.type {
        case .any:
            return (.member(target.expression, name: name), .any)
        case .query:
            guard let field = CompiledExpression.QueryField(rawValue: name) else {
                throw ExpressionError(offset: at, reason: "no such query property '\(name)'")
            }
            let type: StaticType
            switch field {
            case .orderByKey, .orderByValue, .orderByPriority: type = .boolean
            case .orderByChild: type = .string
            case .startAt, .endAt, .equalTo: type = .primitive
            case .limitToFirst, .limitToLast: type = .number
            }
            return (.queryField(target.expression, field), type)
        case .snapshot:
            guard Self.snapshotMethods.contains(name) else {
                throw ExpressionError(offset: at, reason: "no such method/property '\(name)' on a RuleDataSnapshot")
            }
            return (target.expression, .method)
        case .string, .primitive:
            if name == "length" { return (.stringLength(target.expression), .number) }
            guard Self.stringMethods.contains(name) else {
                throw ExpressionError(offset: at, reason: "no such method/property '\(name)' on a string")
            }
            return (target.expression, .method)
        default:
            throw ExpressionError(offset: at, reason: "no such method/property '\(name)' on \(Self.describe(target.type))")
        }
    }

    private func call(_ callee: ExpressionSyntax, _ arguments: [ExpressionSyntax], at: Int) throws(ExpressionError) -> Typed {
        let receiverSyntax: ExpressionSyntax
        let name: String
        let nameOffset: Int
        switch callee {
        case .member(let object, let n, let offset):
            receiverSyntax = object
            name = n
            nameOffset = offset
        case .subscriptAccess(let object, .string(let n, _), let offset):
            receiverSyntax = object
            name = n
            nameOffset = offset
        case .subscriptAccess(_, let key, _):
            throw ExpressionError(offset: key.offset, reason: "invalid method access: the method name must be a string literal")
        default:
            throw ExpressionError(offset: callee.offset, reason: "call on a target that is not a function")
        }
        let receiver = try compile(receiverSyntax)
        switch receiver.type {
        case .snapshot:
            guard let method = CompiledExpression.SnapshotMethod(rawValue: name) else {
                throw ExpressionError(offset: nameOffset, reason: "no such method '\(name)' on a RuleDataSnapshot")
            }
            return try snapshotCall(method, receiver.expression, arguments, at: at)
        case .string, .primitive, .any:
            guard let method = CompiledExpression.StringMethod(rawValue: name) else {
                throw ExpressionError(offset: nameOffset, reason: "no such method '\(name)' on a string")
            }
            let expected: [StaticType]
            let result: StaticType
            switch method {
            case .contains, .beginsWith, .endsWith: expected = [.string]; result = .boolean
            case .replace: expected = [.string, .string]; result = .string
            case .toLowerCase, .toUpperCase: expected = []; result = .string
            case .matches: expected = [.regex]; result = .boolean
            }
            let args = try checkArguments(arguments, expected: expected, method: name, at: at)
            return (.stringCall(method, receiver.expression, args), result)
        default:
            throw ExpressionError(offset: nameOffset, reason: "no such method '\(name)' on \(Self.describe(receiver.type))")
        }
    }

    private func snapshotCall(_ method: CompiledExpression.SnapshotMethod, _ receiver: CompiledExpression,
                              _ arguments: [ExpressionSyntax], at: Int) throws(ExpressionError) -> Typed {
        switch method {
        case .hasChildren where !arguments.isEmpty:
            guard arguments.count == 1 else {
                throw ExpressionError(offset: at, reason: "hasChildren() takes a single array of strings")
            }
            guard case .array(let elements, let arrayAt) = arguments[0] else {
                throw ExpressionError(offset: arguments[0].offset, reason: "hasChildren() takes an array literal of strings")
            }
            guard !elements.isEmpty else {
                throw ExpressionError(offset: arrayAt, reason: "hasChildren() got an empty array")
            }
            var compiled: [CompiledExpression] = []
            for element in elements {
                let typed = try compile(element)
                guard typed.type == .string || typed.type.isFuzzy else {
                    throw ExpressionError(offset: element.offset, reason: "hasChildren() got an array with a non-string value")
                }
                compiled.append(typed.expression)
            }
            return (.hasChildrenList(receiver, compiled), .boolean)
        default:
            let expected: [StaticType] = (method == .child || method == .hasChild) ? [.string] : []
            let args = try checkArguments(arguments, expected: expected, method: method.rawValue, at: at)
            let result: StaticType
            switch method {
            case .val: result = .primitive
            case .child, .parent: result = .snapshot
            case .getPriority: result = .any
            default: result = .boolean
            }
            return (.snapshotCall(method, receiver, args), result)
        }
    }

    private func checkArguments(_ arguments: [ExpressionSyntax], expected: [StaticType], method: String,
                                at: Int) throws(ExpressionError) -> [CompiledExpression] {
        guard arguments.count == expected.count else {
            throw ExpressionError(offset: at, reason: "\(method)() expects \(expected.count) argument(s), got \(arguments.count)")
        }
        var compiled: [CompiledExpression] = []
        for (argument, type) in zip(arguments, expected) {
            let typed = try compile(argument)
            guard typed.type == type || typed.type.isFuzzy else {
                throw ExpressionError(offset: argument.offset,
                                      reason: "\(method)() expects \(Self.describe(type)) argument, got \(Self.describe(typed.type))")
            }
            compiled.append(typed.expression)
        }
        return compiled
    }

    private func binary(_ op: String, _ left: Typed, _ right: Typed, at: Int) throws(ExpressionError) -> Typed {
        func require(_ allowed: [StaticType], what: String) throws(ExpressionError) {
            for (side, typed) in [("left", left), ("right", right)] where !(allowed.contains(typed.type) || typed.type.isFuzzy) {
                throw ExpressionError(offset: at, reason: "the \(side) operand of '\(op)' must be \(what), not \(Self.describe(typed.type))")
            }
        }
        switch op {
        case "&&", "||":
            for (side, typed) in [("left", left), ("right", right)] where typed.type != .boolean {
                throw ExpressionError(offset: at, reason: "the \(side) operand of '\(op)' must be a boolean, not \(Self.describe(typed.type))")
            }
            return op == "&&" ? (.and(left.expression, right.expression), .boolean) : (.or(left.expression, right.expression), .boolean)
        case "+":
            try require([.string, .number], what: "a string or a number")
            let type: StaticType = (left.type == .string || right.type == .string) ? .string
                : (left.type == .number && right.type == .number ? .number : .primitive)
            return (.arithmetic(.add, left.expression, right.expression), type)
        case "-", "*", "/", "%":
            try require([.number], what: "a number")
            let kind: CompiledExpression.Arithmetic = op == "-" ? .subtract : op == "*" ? .multiply : op == "/" ? .divide : .remainder
            return (.arithmetic(kind, left.expression, right.expression), .number)
        case "==", "===", "!=", "!==":
            try require([.string, .number, .boolean, .null], what: "a primitive value")
            return (.equals(left.expression, right.expression, negated: op.hasPrefix("!")), .boolean)
        default:
            try require([.string, .number, .null], what: "a string or a number")
            if !left.type.isFuzzy, !right.type.isFuzzy, left.type != right.type {
                throw ExpressionError(offset: at, reason: "'\(op)' compares values of different types")
            }
            let kind: CompiledExpression.Comparison = op == "<" ? .less : op == "<=" ? .lessOrEqual : op == ">" ? .greater : .greaterOrEqual
            return (.compare(kind, left.expression, right.expression), .boolean)
        }
    }
}
