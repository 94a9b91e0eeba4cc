/// A compiled `matches()` regular expression in the RTDB dialect (spec §3.10), matched over
/// UTF-16 code units like JavaScript. Parsed once at load; matching is a linear-time NFA
/// simulation (no backtracking), so hostile input cannot blow up.
final class RuleRegex: Sendable {
    let source: String
    let caseInsensitive: Bool
    let anchoredStart: Bool
    let anchoredEnd: Bool
    let program: [RegexInstruction]

    static let maxProgramSize = 20_000

    init(pattern: String, flags: String) throws(ExpressionError) {
        source = pattern
        for flag in flags.unicodeScalars where flag != "i" {
            throw ExpressionError(offset: 0, reason: "unsupported regular expression flag '\(flag)' (only 'i' is allowed)")
        }
        if flags.count > 1 { throw ExpressionError(offset: 0, reason: "repeated regular expression flag") }
        caseInsensitive = flags == "i"
        var parser = RegexParser(Array(pattern.utf16))
        let parsed = try parser.parsePattern()
        anchoredStart = parsed.start
        anchoredEnd = parsed.end
        var compiler = RegexCompiler(caseInsensitive: caseInsensitive)
        try compiler.emit(parsed.node)
        compiler.program.append(.match)
        guard compiler.program.count <= Self.maxProgramSize else {
            throw ExpressionError(offset: 0, reason: "regular expression is too large")
        }
        program = compiler.program
    }

    /// True when the pattern matches somewhere in `string` (respecting `^` / `$`).
    func matches(_ string: String) -> Bool {
        let input = Array(string.utf16)
        let count = program.count
        var current: [Int] = []
        var next: [Int] = []
        current.reserveCapacity(count)
        next.reserveCapacity(count)
        var marks = [Int](repeating: -1, count: count)
        var generation = 0

        func add(_ pc: Int, to list: inout [Int], generation: Int, marks: inout [Int]) -> Bool {
            var stack = [pc]
            var matched = false
            while let pc = stack.popLast() {
                if marks[pc] == generation { continue }
                marks[pc] = generation
                switch program[pc] {
                case .jump(let target): stack.append(target)
                case .split(let first, let second):
                    stack.append(second)
                    stack.append(first)
                case .match:
                    matched = true
                    list.append(pc)
                default: list.append(pc)
                }
            }
            return matched
        }

        var position = 0
        if add(0, to: &current, generation: generation, marks: &marks), !anchoredEnd || input.isEmpty { return true }
        while position < input.count {
            let unit = input[position]
            generation += 1
            next.removeAll(keepingCapacity: true)
            var reachedMatch = false
            for pc in current {
                let advances: Bool
                switch program[pc] {
                case .unit(let u): advances = unit == u
                case .folded(let u): advances = RegexCharacters.fold(unit) == u
                case .set(let set): advances = set.contains(unit, caseInsensitive: caseInsensitive)
                case .any: advances = !RegexCharacters.isLineTerminator(unit)
                default: advances = false
                }
                if advances, add(pc + 1, to: &next, generation: generation, marks: &marks) { reachedMatch = true }
            }
            position += 1
            if !anchoredStart, add(0, to: &next, generation: generation, marks: &marks) { reachedMatch = true }
            if reachedMatch, !anchoredEnd || position == input.count { return true }
            if next.isEmpty { return false }
            swap(&current, &next)
        }
        return false
    }
}

enum RegexInstruction: Sendable {
    case unit(UInt16)
    case folded(UInt16)
    case set(RegexSet)
    case any
    case split(Int, Int)
    case jump(Int)
    case match
}

/// A bracket expression or class escape (`\d`, `[a-z\s]`, `[^…]`).
struct RegexSet: Sendable {
    enum Item: Sendable {
        case range(UInt16, UInt16)
        case digit(Bool), word(Bool), space(Bool)  // Bool: negated class (\D, \W, \S)
    }

    var items: [Item]
    var negated: Bool

    func contains(_ unit: UInt16, caseInsensitive: Bool) -> Bool {
        var found = matchesItems(unit)
        if !found, caseInsensitive {
            let upper = RegexCharacters.fold(unit)
            let lower = RegexCharacters.lower(unit)
            found = (upper != unit && matchesItems(upper)) || (lower != unit && matchesItems(lower))
        }
        return found != negated
    }

    private func matchesItems(_ unit: UInt16) -> Bool {
        for item in items {
            switch item {
            case .range(let low, let high): if unit >= low && unit <= high { return true }
            case .digit(let negated): if RegexCharacters.isDigit(unit) != negated { return true }
            case .word(let negated): if RegexCharacters.isWord(unit) != negated { return true }
            case .space(let negated): if RegexCharacters.isSpace(unit) != negated { return true }
            }
        }
        return false
    }
}

/// JavaScript's (ASCII) character classes and simple case folding over UTF-16 code units.
enum RegexCharacters {
    static func isDigit(_ u: UInt16) -> Bool { u >= 0x30 && u <= 0x39 }

    static func isWord(_ u: UInt16) -> Bool {
        isDigit(u) || (u >= 0x41 && u <= 0x5A) || (u >= 0x61 && u <= 0x7A) || u == 0x5F
    }

    static func isSpace(_ u: UInt16) -> Bool {
        switch u {
        case 0x09...0x0D, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
            return true
        default: return false
        }
    }

    static func isLineTerminator(_ u: UInt16) -> Bool { u == 0x0A || u == 0x0D || u == 0x2028 || u == 0x2029 }

    /// Upper-case form of a code unit (JavaScript's Canonicalize for non-unicode regexes).
    static func fold(_ u: UInt16) -> UInt16 {
        if u < 0x80 { return (u >= 0x61 && u <= 0x7A) ? u - 0x20 : u }
        guard let scalar = Unicode.Scalar(UInt32(u)) else { return u }
        let mapped = scalar.properties.uppercaseMapping.unicodeScalars
        guard mapped.count == 1, let only = mapped.first, only.value < 0x10000, only.value >= 0x80 || u < 0x80 else { return u }
        return UInt16(only.value)
    }

    static func lower(_ u: UInt16) -> UInt16 {
        if u < 0x80 { return (u >= 0x41 && u <= 0x5A) ? u + 0x20 : u }
        guard let scalar = Unicode.Scalar(UInt32(u)) else { return u }
        let mapped = scalar.properties.lowercaseMapping.unicodeScalars
        guard mapped.count == 1, let only = mapped.first, only.value < 0x10000 else { return u }
        return UInt16(only.value)
    }
}
