/// The orderings of §8.2 as three-way comparisons (negative, zero, positive), as the JS client
/// defines them (`nameCompare`, `LeafNode.compareTo`, `ChildrenNode.compareTo`, the indexes).
public enum QueryOrder {
    /// Sorts before every key (a bound name only; `[` cannot appear in a real key).
    public static let minName = "[MIN_NAME]"
    /// Sorts after every key.
    public static let maxName = "[MAX_NAME]"

    /// Key order (`KeyOrder`) extended with the two sentinels. Strings are equal only when their
    /// UTF-16 code units are (Swift's `==` would also equate canonically equivalent strings).
    public static func compareNames(_ a: String, _ b: String) -> Int {
        if a.utf16.elementsEqual(b.utf16) { return 0 }
        if a == minName || b == maxName { return -1 }
        if b == minName || a == maxName { return 1 }
        if KeyOrder.less(a, b) { return -1 }
        if KeyOrder.less(b, a) { return 1 }
        return a.utf16.lexicographicallyPrecedes(b.utf16) ? -1 : 1
    }

    /// Value order: null < false < true < numbers < strings (UTF-16) < objects; all objects are equal.
    public static func compareValues(_ a: Node, _ b: Node) -> Int {
        compare(Indexed(a), Indexed(b))
    }

    /// Priority order: none < numbers < strings.
    public static func comparePriorities(_ a: Priority?, _ b: Priority?) -> Int {
        compare(Indexed(a), Indexed(b))
    }

    /// Children order under `index`: the indexed value, then the key (for `.key`, the key alone).
    public static func compare(_ a: (String, Node), _ b: (String, Node), by index: QueryIndex) -> Int {
        let byValue = compare(Indexed(a.1, index), Indexed(b.1, index))
        return byValue != 0 ? byValue : compareNames(a.0, b.0)
    }

    /// The children of `node` in `index` order (none for a leaf or null).
    public static func sortedChildren(of node: Node, by index: QueryIndex) -> [(String, Node)] {
        let children = node.children
        if index == .key { return children.sorted { compareNames($0.key, $1.key) < 0 }.map { ($0.key, $0.value) } }
        var entries = children.map { (key: $0.key, node: $0.value, sortValue: Indexed($0.value, index)) }
        entries.sort { a, b in
            let byValue = compare(a.sortValue, b.sortValue)
            return byValue != 0 ? byValue < 0 : compareNames(a.key, b.key) < 0
        }
        return entries.map { ($0.key, $0.node) }
    }

    /// What a child is compared by: a leaf-like value, null, or "an object" (rank order as in
    /// JS `LeafNode.VALUE_TYPE_ORDER`, with the empty node below and children nodes above).
    enum Indexed {
        case null, bool(Bool), number(Double), string(String), object

        init(_ node: Node) {
            switch node {
            case .leaf(.bool(let b), _): self = .bool(b)
            case .leaf(.number(let n), _): self = .number(n)
            case .leaf(.string(let s), _): self = .string(s)
            case .branch(let children, _): self = children.isEmpty ? .null : .object
            }
        }

        init(_ priority: Priority?) {
            switch priority {
            case nil: self = .null
            case .number(let n)?: self = .number(n)
            case .string(let s)?: self = .string(s)
            }
        }

        init(_ value: QueryValue) {
            switch value {
            case .null: self = .null
            case .bool(let b): self = .bool(b)
            case .number(let n): self = .number(n)
            case .string(let s): self = .string(s)
            }
        }

        /// The value a child is sorted by under `index` (nothing for `.key`: the key decides).
        init(_ node: Node, _ index: QueryIndex) {
            switch index {
            case .key: self = .null
            case .value: self.init(node)
            case .priority: self.init(node.priority)
            case .child(let path): self.init(node.node(at: path))
            }
        }

        var rank: Int {
            switch self {
            case .null: return 0
            case .bool: return 1
            case .number: return 2
            case .string: return 3
            case .object: return 4
            }
        }
    }

    static func compare(_ a: Indexed, _ b: Indexed) -> Int {
        switch (a, b) {
        case let (.bool(x), .bool(y)): return x == y ? 0 : (x ? 1 : -1)
        case let (.number(x), .number(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.string(x), .string(y)):
            if x.utf16.elementsEqual(y.utf16) { return 0 }
            return x.utf16.lexicographicallyPrecedes(y.utf16) ? -1 : 1
        default: return a.rank - b.rank
        }
    }
}
