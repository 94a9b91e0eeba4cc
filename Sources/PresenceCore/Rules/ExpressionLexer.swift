/// Tokens of a rule expression (a JavaScript expression subset, spec §3.1).
struct ExpressionToken: Equatable {
    enum Kind: Equatable {
        case identifier(String)
        case number(Double)
        case string(String)
        case regex(pattern: String, flags: String)
        case punct(String)  // operators and punctuation, e.g. "===", "(", "?"
        case end
    }

    var kind: Kind
    /// 0-based offset (in Unicode scalars) of the first character.
    var offset: Int
}

/// A load-time error inside an expression: 0-based scalar offset and reason.
struct ExpressionError: Error {
    var offset: Int
    var reason: String
}

/// Splits an expression into tokens. Regex literals are recognised where an operand is expected.
struct ExpressionLexer {
    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ source: String) { scalars = Array(source.unicodeScalars) }

    /// Longest first, so that "===" wins over "==" and "=".
    private static let punctuators: [String] = [
        "===", "!==", "**", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "=>",
        "(", ")", "[", "]", "{", "}", ".", ",", "?", ":", ";", "!", "-", "+", "*", "/", "%",
        "<", ">", "=", "&", "|", "^", "~", "@", "#", "`",
    ].sorted { $0.count > $1.count }

    mutating func tokenize() throws(ExpressionError) -> [ExpressionToken] {
        var tokens: [ExpressionToken] = []
        while true {
            try skipTrivia()
            guard index < scalars.count else {
                tokens.append(ExpressionToken(kind: .end, offset: scalars.count))
                return tokens
            }
            let start = index
            let c = scalars[index]
            if Self.isIdentifierStart(c) {
                var name = String.UnicodeScalarView()
                while index < scalars.count, Self.isIdentifierPart(scalars[index]) {
                    name.append(scalars[index])
                    index += 1
                }
                tokens.append(ExpressionToken(kind: .identifier(String(name)), offset: start))
            } else if Self.isDigit(c) || (c == "." && index + 1 < scalars.count && Self.isDigit(scalars[index + 1])) {
                tokens.append(ExpressionToken(kind: .number(try lexNumber()), offset: start))
            } else if c == "'" || c == "\"" {
                tokens.append(ExpressionToken(kind: .string(try lexString(quote: c)), offset: start))
            } else if c == "/" && Self.expectsOperand(after: tokens.last) {
                tokens.append(try lexRegex())
            } else {
                var matched: String?
                for p in Self.punctuators where matches(p) {
                    matched = p
                    break
                }
                guard let p = matched else {
                    throw ExpressionError(offset: start, reason: "unexpected character '\(Character(c))'")
                }
                index += p.unicodeScalars.count
                tokens.append(ExpressionToken(kind: .punct(p), offset: start))
            }
        }
    }

    private func matches(_ p: String) -> Bool {
        var i = index
        for s in p.unicodeScalars {
            guard i < scalars.count, scalars[i] == s else { return false }
            i += 1
        }
        return true
    }

    /// A `/` starts a regex literal unless it follows something that ends an operand.
    private static func expectsOperand(after token: ExpressionToken?) -> Bool {
        guard let token else { return true }
        switch token.kind {
        case .identifier, .number, .string, .regex: return false
        case .punct(let p): return p != ")" && p != "]"
        case .end: return true
        }
    }

    private mutating func skipTrivia() throws(ExpressionError) {
        while index < scalars.count {
            let c = scalars[index]
            if c.properties.isWhitespace || c == "\u{FEFF}" {
                index += 1
            } else if c == "/", index + 1 < scalars.count, scalars[index + 1] == "/" {
                while index < scalars.count, scalars[index] != "\n", scalars[index] != "\r" { index += 1 }
            } else if c == "/", index + 1 < scalars.count, scalars[index + 1] == "*" {
                let start = index
                index += 2
                while index + 1 < scalars.count, !(scalars[index] == "*" && scalars[index + 1] == "/") { index += 1 }
                guard index + 1 < scalars.count else { throw ExpressionError(offset: start, reason: "unterminated comment") }
                index += 2
            } else {
                return
            }
        }
    }

    static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
        (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_" || c == "$"
    }

    static func isIdentifierPart(_ c: Unicode.Scalar) -> Bool { isIdentifierStart(c) || isDigit(c) }

    static func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }

    private mutating func lexNumber() throws(ExpressionError) -> Double {
        let start = index
        var text = ""
        func take(_ predicate: (Unicode.Scalar) -> Bool) {
            while index < scalars.count, predicate(scalars[index]) {
                text.unicodeScalars.append(scalars[index])
                index += 1
            }
        }
        take(Self.isDigit)
        if index < scalars.count, scalars[index] == "." {
            text += "."
            index += 1
            take(Self.isDigit)
        }
        if index < scalars.count, scalars[index] == "e" || scalars[index] == "E" {
            text += "e"
            index += 1
            if index < scalars.count, scalars[index] == "+" || scalars[index] == "-" {
                text.unicodeScalars.append(scalars[index])
                index += 1
            }
            take(Self.isDigit)
        }
        if index < scalars.count, Self.isIdentifierStart(scalars[index]) {
            throw ExpressionError(offset: index, reason: "identifier directly after a number")
        }
        if text.hasPrefix(".") { text = "0" + text }
        if text.hasSuffix(".") { text += "0" }
        guard let value = Double(text), value.isFinite else {
            throw ExpressionError(offset: start, reason: "invalid number")
        }
        return value
    }

    private mutating func lexString(quote: Unicode.Scalar) throws(ExpressionError) -> String {
        let start = index
        index += 1
        var out = String.UnicodeScalarView()
        while index < scalars.count {
            let c = scalars[index]
            index += 1
            if c == quote { return String(out) }
            if c == "\n" || c == "\r" {
                throw ExpressionError(offset: index - 1, reason: "line break inside a string literal")
            }
            guard c == "\\" else {
                out.append(c)
                continue
            }
            guard index < scalars.count else { break }
            let e = scalars[index]
            index += 1
            switch e {
            case "n": out.append("\n")
            case "t": out.append("\t")
            case "r": out.append("\r")
            case "b": out.append("\u{08}")
            case "f": out.append("\u{0C}")
            case "v": out.append("\u{0B}")
            case "0": out.append("\u{00}")
            case "\n": continue  // line continuation
            case "x": out.append(try hexScalar(digits: 2))
            case "u":
                if index < scalars.count, scalars[index] == "{" {
                    index += 1
                    var value: UInt32 = 0
                    var count = 0
                    while index < scalars.count, scalars[index] != "}" {
                        guard let d = Self.hexValue(scalars[index]), count < 8 else {
                            throw ExpressionError(offset: index, reason: "invalid unicode escape")
                        }
                        value = value * 16 + d
                        count += 1
                        index += 1
                    }
                    index += 1
                    guard count > 0, let s = Unicode.Scalar(value) else {
                        throw ExpressionError(offset: index - 1, reason: "invalid unicode escape")
                    }
                    out.append(s)
                } else {
                    out.append(try hexScalar(digits: 4))
                }
            default: out.append(e)
            }
        }
        throw ExpressionError(offset: start, reason: "unterminated string literal")
    }

    private static func hexValue(_ c: Unicode.Scalar) -> UInt32? {
        switch c {
        case "0"..."9": return c.value - 0x30
        case "a"..."f": return c.value - 0x61 + 10
        case "A"..."F": return c.value - 0x41 + 10
        default: return nil
        }
    }

    private mutating func hexScalar(digits: Int) throws(ExpressionError) -> Unicode.Scalar {
        var value: UInt32 = 0
        for _ in 0..<digits {
            guard index < scalars.count, let d = Self.hexValue(scalars[index]) else {
                throw ExpressionError(offset: index, reason: "invalid escape sequence")
            }
            value = value * 16 + d
            index += 1
        }
        // Lone surrogates cannot live in a Swift string; they become U+FFFD.
        return Unicode.Scalar(value) ?? "\u{FFFD}"
    }

    private mutating func lexRegex() throws(ExpressionError) -> ExpressionToken {
        let start = index
        index += 1
        var pattern = String.UnicodeScalarView()
        var inClass = false
        while true {
            guard index < scalars.count, scalars[index] != "\n", scalars[index] != "\r" else {
                throw ExpressionError(offset: start, reason: "unterminated regular expression")
            }
            let c = scalars[index]
            index += 1
            if c == "\\" {
                pattern.append(c)
                if index < scalars.count {
                    pattern.append(scalars[index])
                    index += 1
                }
                continue
            }
            if c == "[" { inClass = true } else if c == "]" { inClass = false } else if c == "/" && !inClass { break }
            pattern.append(c)
        }
        var flags = ""
        while index < scalars.count, Self.isIdentifierPart(scalars[index]) {
            flags.unicodeScalars.append(scalars[index])
            index += 1
        }
        return ExpressionToken(kind: .regex(pattern: String(pattern), flags: flags), offset: start)
    }
}
