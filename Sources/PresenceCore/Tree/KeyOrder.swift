/// Firebase's key order (§8.2): keys that read as 32-bit integers first, numerically (shorter string
/// first on a tie), then all other keys by UTF-16 code units, as the JavaScript client compares them.
public enum KeyOrder {
    /// The key's value when it reads as a 32-bit integer the way the JS client's `tryParseInt` reads
    /// it: `^-?(0*)\d{1,10}$` (any leading zeros, then at most 10 digits) within the 32-bit range.
    /// `"-0"` is 0, as `Number("-0")` compares equal to 0.
    public static func intValue(_ key: String) -> Int32? {
        var bytes = key.utf8[...]
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        var significant = bytes.drop { $0 == 0x30 }
        if significant.isEmpty { significant = bytes.suffix(1) }  // all zeros: the value 0
        guard significant.count <= 10 else { return nil }
        var value: Int64 = 0
        for byte in significant { value = value * 10 + Int64(byte - 0x30) }
        let signed = negative ? -value : value
        guard signed >= Int64(Int32.min), signed <= Int64(Int32.max) else { return nil }
        return Int32(signed)
    }

    public static func less(_ a: String, _ b: String) -> Bool {
        if a == b { return false }
        let ia = intValue(a), ib = intValue(b)
        switch (ia, ib) {
        case let (x?, y?):
            if x != y { return x < y }
            // The JS client finds "-0" and "00" equal (same value, same length); break the tie by
            // the text, so that every order (and a hash that follows it) is the same each time.
            if a.utf8.count != b.utf8.count { return a.utf8.count < b.utf8.count }
            return a.utf8.lexicographicallyPrecedes(b.utf8)
        case (.some, nil): return true
        case (nil, .some): return false
        case (nil, nil): return a.utf16.lexicographicallyPrecedes(b.utf16)
        }
    }

    public static func sortedKeys<S: Sequence>(_ keys: S) -> [String] where S.Element == String {
        let all = Array(keys)
        guard all.count > 16 else { return all.sorted(by: less) }
        let decorated = SortKeys(all)
        return decorated.order().map { all[$0] }
    }

    /// The entries of a dictionary in key order. A large one is sorted by index, each key read as
    /// an integer once and compared as bytes when ASCII: serializing 50,000 children used to parse
    /// keys again at every comparison and move every (key, value) pair through the sort.
    public static func sorted<Value>(_ entries: [String: Value]) -> [(key: String, value: Value)] {
        guard entries.count > 16 else {
            var pairs = entries.map { (key: $0.key, value: $0.value) }
            if pairs.count > 1 { pairs.sort { less($0.key, $1.key) } }
            return pairs
        }
        // `keys` and `values` of one dictionary list the entries in the same order.
        let keys = Array(entries.keys), values = Array(entries.values)
        return SortKeys(keys).order().map { (keys[$0], values[$0]) }
    }

    /// Keys with what ordering needs precomputed.
    private struct SortKeys {
        let keys: [String]
        let ints: [Int32?]
        let ascii: [Bool]

        init(_ keys: [String]) {
            self.keys = keys
            ints = keys.map(KeyOrder.intValue)
            ascii = keys.map { $0.utf8.allSatisfy { $0 < 0x80 } }
        }

        /// The indices of `keys` in key order.
        func order() -> [Int] {
            var order = Array(keys.indices)
            order.sort { a, b in
                switch (ints[a], ints[b]) {
                case let (x?, y?):
                    if x != y { return x < y }
                    if keys[a].utf8.count != keys[b].utf8.count { return keys[a].utf8.count < keys[b].utf8.count }
                    return keys[a].utf8.lexicographicallyPrecedes(keys[b].utf8)  // as `less`
                case (.some, nil): return true
                case (nil, .some): return false
                case (nil, nil):
                    // ASCII: code units and bytes agree, and Swift compares ASCII strings as bytes.
                    if ascii[a] && ascii[b] { return keys[a] < keys[b] }
                    return keys[a] != keys[b] && keys[a].utf16.lexicographicallyPrecedes(keys[b].utf16)
                }
            }
            return order
        }
    }
}
