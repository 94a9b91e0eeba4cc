/// Parsed form of an RTDB regular expression.
indirect enum RegexNode {
    case unit(UInt16)
    case set(RegexSet)
    case any
    case concatenation([RegexNode])
    case alternation([RegexNode])
    case repetition(RegexNode, min: Int, max: Int?)
}

/// Validates and parses the RTDB regex subset: literals, `\` escapes (class escapes `\d \w \s \D \W
/// \S`, anything else literal), `.`, groups, `|` without empty branches, `* + ?`, `{n}`, `{n,}`,
/// `{n,m}` (optionally lazy), bracket sets; `^` only first and `$` only last. A metacharacter at the
/// start of the pattern or of a group is a literal.
struct RegexParser {
    private let units: [UInt16]
    private var index = 0
    private var end = 0

    init(_ units: [UInt16]) { self.units = units }

    private static func u(_ c: Unicode.Scalar) -> UInt16 { UInt16(c.value) }

    mutating func parsePattern() throws(ExpressionError) -> (node: RegexNode, start: Bool, end: Bool) {
        var start = false
        var finish = false
        end = units.count
        if index < end, units[index] == Self.u("^") {
            start = true
            index += 1
        }
        if end > index, units[end - 1] == Self.u("$") {
            var backslashes = 0
            var i = end - 2
            while i >= index, units[i] == Self.u("\\") {
                backslashes += 1
                i -= 1
            }
            if backslashes % 2 == 0 {
                finish = true
                end -= 1
            }
        }
        guard index < end else { throw fail("empty regular expression") }
        let node = try parseAlternation(positional: !start)
        if index < end { throw fail("unmatched ')' in regular expression") }
        return (node, start, finish)
    }

    private func fail(_ reason: String) -> ExpressionError {
        ExpressionError(offset: 0, reason: "invalid regular expression at \(index + 1): \(reason)")
    }

    private mutating func parseAlternation(positional: Bool) throws(ExpressionError) -> RegexNode {
        var branches = [try parseSequence(positional: positional)]
        while index < end, units[index] == Self.u("|") {
            index += 1
            branches.append(try parseSequence(positional: false))
        }
        return branches.count == 1 ? branches[0] : .alternation(branches)
    }

    private mutating func parseSequence(positional: Bool) throws(ExpressionError) -> RegexNode {
        var items: [RegexNode] = []
        var first = positional
        while index < end {
            let c = units[index]
            if !first, c == Self.u("|") || c == Self.u(")") { break }
            var atom = try parseAtom(positional: first)
            first = false
            atom = try parseQuantifiers(atom)
            items.append(atom)
        }
        guard !items.isEmpty else { throw fail("empty alternative") }
        return items.count == 1 ? items[0] : .concatenation(items)
    }

    private static let positionalLiterals: Set<UInt16> = Set("|)?+}{*".unicodeScalars.map { UInt16($0.value) })

    private mutating func parseAtom(positional: Bool) throws(ExpressionError) -> RegexNode {
        let c = units[index]
        if positional, Self.positionalLiterals.contains(c) {
            index += 1
            return .unit(c)
        }
        index += 1
        switch c {
        case Self.u("("):
            guard index < end, units[index] != Self.u(")") else { throw fail("empty group") }
            let inner = try parseAlternation(positional: true)
            guard index < end, units[index] == Self.u(")") else { throw fail("unterminated group") }
            index += 1
            return inner
        case Self.u("["): return .set(try parseSet())
        case Self.u("\\"):
            guard index < units.count else { throw fail("trailing backslash") }
            let e = units[index]
            index += 1
            if let item = Self.classItem(e) { return .set(RegexSet(items: [item], negated: false)) }
            return .unit(e)
        case Self.u("."): return .any
        case Self.u("^"): throw fail("'^' is only allowed at the start of the pattern")
        case Self.u("$"): throw fail("'$' is only allowed at the end of the pattern")
        case Self.u("*"), Self.u("+"), Self.u("?"), Self.u("{"): throw fail("nothing to repeat")
        case Self.u(")"): throw fail("unmatched ')'")
        default: return .unit(c)
        }
    }

    private static func classItem(_ e: UInt16) -> RegexSet.Item? {
        switch e {
        case u("d"): return .digit(false)
        case u("D"): return .digit(true)
        case u("w"): return .word(false)
        case u("W"): return .word(true)
        case u("s"): return .space(false)
        case u("S"): return .space(true)
        default: return nil
        }
    }

    private mutating func parseQuantifiers(_ atom: RegexNode) throws(ExpressionError) -> RegexNode {
        guard index < end else { return atom }
        var min = 0
        var max: Int?
        switch units[index] {
        case Self.u("*"): index += 1
        case Self.u("+"): min = 1; index += 1
        case Self.u("?"): max = 1; index += 1
        case Self.u("{"):
            index += 1
            min = try parseCount()
            max = min
            if index < end, units[index] == Self.u(",") {
                index += 1
                max = (index < end && units[index] != Self.u("}")) ? try parseCount() : nil
            }
            guard index < end, units[index] == Self.u("}") else { throw fail("invalid quantifier") }
            index += 1
            if let max, max < min { throw fail("numbers out of order in {} quantifier") }
            if min > 1000 || (max ?? 0) > 1000 { throw fail("repetition count too large") }
        default: return atom
        }
        if index < end, units[index] == Self.u("?") { index += 1 }  // lazy: irrelevant for a yes/no match
        if index < end, [Self.u("*"), Self.u("+"), Self.u("?"), Self.u("{")].contains(units[index]) {
            throw fail("nothing to repeat")
        }
        return .repetition(atom, min: min, max: max)
    }

    private mutating func parseCount() throws(ExpressionError) -> Int {
        var value = 0
        var digits = 0
        while index < end, units[index] >= 0x30, units[index] <= 0x39 {
            if digits == 1 && value == 0 { throw fail("invalid quantifier") }
            value = min(value * 10 + Int(units[index] - 0x30), 100_000)
            digits += 1
            index += 1
        }
        guard digits > 0 else { throw fail("invalid quantifier") }
        return value
    }

    private mutating func parseSet() throws(ExpressionError) -> RegexSet {
        var negated = false
        if index < end, units[index] == Self.u("^") {
            negated = true
            index += 1
        }
        var items: [RegexSet.Item] = []
        while true {
            guard index < end else { throw fail("unterminated character set") }
            let c = units[index]
            if c == Self.u("]") {
                index += 1
                break
            }
            let (low, lowClass) = try parseSetCharacter()
            if let lowClass {
                items.append(lowClass)
                continue
            }
            if index + 1 < end, units[index] == Self.u("-"), units[index + 1] != Self.u("]") {
                index += 1
                let (high, highClass) = try parseSetCharacter()
                if let highClass {
                    items.append(contentsOf: [.range(low, low), .range(Self.u("-"), Self.u("-")), highClass])
                    continue
                }
                guard low <= high else { throw fail("range out of order in character set") }
                items.append(.range(low, high))
            } else {
                items.append(.range(low, low))
            }
        }
        guard !items.isEmpty else { throw fail("empty character set") }
        return RegexSet(items: items, negated: negated)
    }

    private mutating func parseSetCharacter() throws(ExpressionError) -> (UInt16, RegexSet.Item?) {
        let c = units[index]
        index += 1
        guard c == Self.u("\\") else { return (c, nil) }
        guard index < end else { throw fail("trailing backslash") }
        let e = units[index]
        index += 1
        return (e, Self.classItem(e))
    }
}

/// Turns a `RegexNode` into NFA instructions for `RuleRegex.matches`.
struct RegexCompiler {
    let caseInsensitive: Bool
    var program: [RegexInstruction] = []

    mutating func emit(_ node: RegexNode) throws(ExpressionError) {
        guard program.count <= RuleRegex.maxProgramSize else {
            throw ExpressionError(offset: 0, reason: "regular expression is too large")
        }
        switch node {
        case .unit(let u): program.append(caseInsensitive ? .folded(RegexCharacters.fold(u)) : .unit(u))
        case .set(let set): program.append(.set(set))
        case .any: program.append(.any)
        case .concatenation(let items):
            for item in items { try emit(item) }
        case .alternation(let branches):
            var jumps: [Int] = []
            for (i, branch) in branches.enumerated() {
                if i < branches.count - 1 {
                    let split = program.count
                    program.append(.split(split + 1, 0))
                    try emit(branch)
                    jumps.append(program.count)
                    program.append(.jump(0))
                    program[split] = .split(split + 1, program.count)
                } else {
                    try emit(branch)
                }
            }
            for j in jumps { program[j] = .jump(program.count) }
        case .repetition(let inner, let min, let max):
            for _ in 0..<min { try emit(inner) }
            if let max {
                var splits: [Int] = []
                for _ in min..<max {
                    splits.append(program.count)
                    program.append(.split(program.count + 1, 0))
                    try emit(inner)
                }
                for s in splits { program[s] = .split(s + 1, program.count) }
            } else {
                let loop = program.count
                program.append(.split(loop + 1, 0))
                try emit(inner)
                program.append(.jump(loop))
                program[loop] = .split(loop + 1, program.count)
            }
        }
    }
}
