/// Recursive-descent parser for rule expressions. Precedence, highest first (spec §3.2):
/// member/subscript/call, unary `!` `-`, `* / %`, `+ -`, relational, equality, `&&`, `||`, `?:`.
struct ExpressionParser {
    static let maxNesting = 100

    private var tokens: [ExpressionToken]
    private var position = 0
    private var depth = 0

    static func parse(_ source: String) throws(ExpressionError) -> ExpressionSyntax {
        var lexer = ExpressionLexer(source)
        var parser = ExpressionParser(tokens: try lexer.tokenize())
        let expression = try parser.parseConditional()
        let next = parser.current
        if next.kind != .end {
            if case .punct(let p) = next.kind {
                switch p {
                case ";": throw ExpressionError(offset: next.offset, reason: "a rule must be a single expression (found ';')")
                case ",": throw ExpressionError(offset: next.offset, reason: "the comma operator is not supported")
                case "=": throw ExpressionError(offset: next.offset, reason: "assignment is not supported")
                default: throw ExpressionError(offset: next.offset, reason: "unexpected '\(p)'")
                }
            }
            throw ExpressionError(offset: next.offset, reason: "unexpected \(Self.describe(next)) after the expression")
        }
        return expression
    }

    private init(tokens: [ExpressionToken]) { self.tokens = tokens }

    private var current: ExpressionToken { tokens[position] }

    private static func describe(_ token: ExpressionToken) -> String {
        switch token.kind {
        case .identifier(let name): return "identifier '\(name)'"
        case .number: return "number"
        case .string: return "string"
        case .regex: return "regular expression"
        case .punct(let p): return "'\(p)'"
        case .end: return "end of expression"
        }
    }

    private func isPunct(_ p: String) -> Bool {
        if case .punct(let q) = current.kind { return q == p }
        return false
    }

    private mutating func expect(_ p: String) throws(ExpressionError) {
        guard isPunct(p) else {
            throw ExpressionError(offset: current.offset, reason: "expected '\(p)' but found \(Self.describe(current))")
        }
        position += 1
    }

    private mutating func enter() throws(ExpressionError) {
        depth += 1
        if depth > Self.maxNesting {
            throw ExpressionError(offset: current.offset, reason: "expression nested too deeply")
        }
    }

    mutating func parseConditional() throws(ExpressionError) -> ExpressionSyntax {
        try enter()
        defer { depth -= 1 }
        let test = try parseBinary(level: 0)
        guard isPunct("?") else { return test }
        let at = current.offset
        position += 1
        let consequent = try parseConditional()
        try expect(":")
        let alternate = try parseConditional()
        return .conditional(test, consequent, alternate, at: at)
    }

    private static let levels: [[String]] = [
        ["||"], ["&&"], ["==", "===", "!=", "!=="], ["<", "<=", ">", ">="], ["+", "-"], ["*", "/", "%"],
    ]
    /// Operators that exist in JavaScript but not in the rules language.
    private static let unsupportedBinary: Set<String> = ["**", "&", "|", "^", "=>", "="]

    private mutating func parseBinary(level: Int) throws(ExpressionError) -> ExpressionSyntax {
        if level == Self.levels.count { return try parseUnary() }
        var left = try parseBinary(level: level + 1)
        while case .punct(let p) = current.kind {
            if Self.unsupportedBinary.contains(p) {
                throw ExpressionError(offset: current.offset, reason: p == "=" ? "assignment is not supported" : "unsupported operator '\(p)'")
            }
            guard Self.levels[level].contains(p) else { break }
            let at = current.offset
            position += 1
            let right = try parseBinary(level: level + 1)
            left = .binary(p, left, right, at: at)
        }
        if case .identifier(let name) = current.kind, name == "in" || name == "instanceof" {
            throw ExpressionError(offset: current.offset, reason: "unsupported operator '\(name)'")
        }
        return left
    }

    private mutating func parseUnary() throws(ExpressionError) -> ExpressionSyntax {
        if case .punct(let p) = current.kind {
            let at = current.offset
            switch p {
            case "!", "-":
                position += 1
                try enter()
                defer { depth -= 1 }
                return .unary(p, try parseUnary(), at: at)
            case "+", "~", "++", "--":
                throw ExpressionError(offset: at, reason: "unsupported unary operator '\(p)'")
            default: break
            }
        }
        if case .identifier(let name) = current.kind, ["typeof", "void", "delete", "new"].contains(name) {
            throw ExpressionError(offset: current.offset, reason: "unsupported operator '\(name)'")
        }
        return try parsePostfix()
    }

    private mutating func parsePostfix() throws(ExpressionError) -> ExpressionSyntax {
        var expression = try parsePrimary()
        while true {
            let at = current.offset
            if isPunct(".") {
                position += 1
                guard case .identifier(let name) = current.kind else {
                    throw ExpressionError(offset: current.offset, reason: "expected a property name after '.'")
                }
                position += 1
                expression = .member(expression, name: name, at: at)
            } else if isPunct("[") {
                position += 1
                let key = try parseConditional()
                try expect("]")
                expression = .subscriptAccess(expression, key: key, at: at)
            } else if isPunct("(") {
                position += 1
                var arguments: [ExpressionSyntax] = []
                if !isPunct(")") {
                    while true {
                        arguments.append(try parseConditional())
                        if isPunct(",") { position += 1 } else { break }
                    }
                }
                try expect(")")
                expression = .call(expression, arguments: arguments, at: at)
            } else if isPunct("++") || isPunct("--") {
                throw ExpressionError(offset: at, reason: "unsupported operator")
            } else {
                return expression
            }
        }
    }

    private mutating func parsePrimary() throws(ExpressionError) -> ExpressionSyntax {
        let token = current
        switch token.kind {
        case .number(let n):
            position += 1
            return .number(n, at: token.offset)
        case .string(let s):
            position += 1
            return .string(s, at: token.offset)
        case .regex(let pattern, let flags):
            position += 1
            return .regex(pattern: pattern, flags: flags, at: token.offset)
        case .identifier(let name):
            position += 1
            switch name {
            case "true": return .bool(true, at: token.offset)
            case "false": return .bool(false, at: token.offset)
            case "null": return .null(at: token.offset)
            case "var", "let", "const", "function", "if", "return", "this", "undefined":
                throw ExpressionError(offset: token.offset, reason: "'\(name)' is not supported in rules")
            default: return .identifier(name, at: token.offset)
            }
        case .punct("("):
            position += 1
            let inner = try parseConditional()
            try expect(")")
            return inner
        case .punct("["):
            position += 1
            var elements: [ExpressionSyntax] = []
            if !isPunct("]") {
                while true {
                    elements.append(try parseConditional())
                    if isPunct(",") { position += 1 } else { break }
                }
            }
            try expect("]")
            return .array(elements, at: token.offset)
        case .punct("{"):
            throw ExpressionError(offset: token.offset, reason: "object literals are not supported")
        case .end:
            throw ExpressionError(offset: token.offset, reason: "unexpected end of expression")
        case .punct(let p):
            throw ExpressionError(offset: token.offset, reason: "unexpected '\(p)'")
        }
    }
}
