/// Firebase's key order (§8.2): keys that read as 32-bit integers first, numerically (shorter string
/// first on a tie), then all other keys by UTF-16 code units, as the JavaScript client compares them.
public enum KeyOrder {
    public static func intValue(_ key: String) -> Int32? {
        let utf8 = key.utf8
        guard !utf8.isEmpty, utf8.count <= 11 else { return nil }
        var iterator = utf8.makeIterator()
        var negative = false
        var digits = 0
        var value: Int64 = 0
        var first = true
        while let byte = iterator.next() {
            if first && byte == UInt8(ascii: "-") {
                negative = true
                first = false
                continue
            }
            first = false
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            digits += 1
            value = value * 10 + Int64(byte - 0x30)
        }
        guard digits > 0, digits <= 10 else { return nil }
        let signed = negative ? -value : value
        guard signed >= Int64(Int32.min), signed <= Int64(Int32.max) else { return nil }
        // "-0" is not an integer key in the JS client (it would not round-trip).
        if negative && value == 0 { return nil }
        return Int32(signed)
    }

    public static func less(_ a: String, _ b: String) -> Bool {
        if a == b { return false }
        let ia = intValue(a), ib = intValue(b)
        switch (ia, ib) {
        case let (x?, y?):
            if x != y { return x < y }
            return a.utf8.count < b.utf8.count
        case (.some, nil): return true
        case (nil, .some): return false
        case (nil, nil): return a.utf16.lexicographicallyPrecedes(b.utf16)
        }
    }

    public static func sortedKeys<S: Sequence>(_ keys: S) -> [String] where S.Element == String {
        keys.sorted(by: less)
    }
}
