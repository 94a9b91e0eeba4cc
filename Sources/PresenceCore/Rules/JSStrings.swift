/// String helpers with JavaScript semantics: code-unit comparisons (no Unicode canonical
/// equivalence, unlike Swift's `==`/`hasPrefix`) and literal replace-all.
enum JSStrings {
    static func contains(_ s: String, _ needle: String) -> Bool {
        needle.isEmpty || firstIndex(of: Array(needle.utf8), in: Array(s.utf8), from: 0) != nil
    }

    static func hasSuffix(_ s: String, _ suffix: String) -> Bool {
        s.utf8.reversed().starts(with: suffix.utf8.reversed())
    }

    /// Replaces every occurrence of the literal `target` (an empty target changes nothing).
    static func replaceAll(_ s: String, _ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return s }
        let haystack = Array(s.utf8)
        let needle = Array(target.utf8)
        let insert = Array(replacement.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(haystack.count)
        var index = 0
        while let found = firstIndex(of: needle, in: haystack, from: index) {
            out.append(contentsOf: haystack[index..<found])
            out.append(contentsOf: insert)
            index = found + needle.count
        }
        out.append(contentsOf: haystack[index...])
        return String(decoding: out, as: UTF8.self)
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count - start >= needle.count else { return nil }
        let first = needle[0]
        var i = start
        let last = haystack.count - needle.count
        while i <= last {
            if haystack[i] == first {
                var j = 1
                while j < needle.count, haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

/// JavaScript's Number-to-String conversion (ECMAScript Number::toString): `1` → "1", `1.5` → "1.5",
/// `1e21` → "1e+21", `1e-7` → "1e-7", NaN → "NaN".
enum JSNumberFormat {
    static func string(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == 0 { return "0" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        if value < 0 { return "-" + string(-value) }
        if value == value.rounded(), value < 1e15 { return String(Int64(value)) }
        // Swift prints the shortest round-tripping digits, e.g. "1.2345e-07" or "123.45".
        let text = "\(value)"
        var mantissa = Substring(text)
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            exponent = Int(text[text.index(after: e)...]) ?? 0
        }
        var digits = ""
        var pointPosition = mantissa.count
        if let dot = mantissa.firstIndex(of: ".") {
            pointPosition = mantissa.distance(from: mantissa.startIndex, to: dot)
        }
        for c in mantissa where c != "." { digits.append(c) }
        // value = 0.digits × 10^n
        var n = pointPosition + exponent
        while digits.hasPrefix("0") {
            digits.removeFirst()
            n -= 1
        }
        while digits.hasSuffix("0") { digits.removeLast() }
        let k = digits.count
        if k <= n && n <= 21 { return digits + String(repeating: "0", count: n - k) }
        if 0 < n && n <= 21 {
            let split = digits.index(digits.startIndex, offsetBy: n)
            return String(digits[..<split]) + "." + String(digits[split...])
        }
        if -6 < n && n <= 0 { return "0." + String(repeating: "0", count: -n) + digits }
        let e = n - 1
        let sign = e < 0 ? "-" : "+"
        let head = String(digits.prefix(1))
        let tail = k > 1 ? "." + String(digits.dropFirst()) : ""
        return head + tail + "e" + sign + String(abs(e))
    }
}
