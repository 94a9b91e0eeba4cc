/// A primitive stored value.
public enum Leaf: Sendable, Equatable, Hashable {
    case bool(Bool)
    case number(Double)
    case string(String)

    public var json: JSON {
        switch self {
        case .bool(let b): return .bool(b)
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        }
    }
}

/// A node's priority: a number or a string (§8.1).
public enum Priority: Sendable, Equatable, Hashable {
    case number(Double)
    case string(String)

    public var json: JSON {
        switch self {
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        }
    }
}

/// An immutable value of the data tree. `Node.null` (an empty branch) means "no data".
///
/// Branches hold their children in a dictionary; mutation helpers keep the dictionaries uniquely
/// referenced so a write costs O(depth), not O(size).
public enum Node: Sendable, Equatable {
    case leaf(Leaf, priority: Priority?)
    case branch([String: Node], priority: Priority?)

    public static let null = Node.branch([:], priority: nil)

    public init(_ leaf: Leaf) { self = .leaf(leaf, priority: nil) }

    public var isNull: Bool {
        if case .branch(let children, _) = self { return children.isEmpty }
        return false
    }

    public var exists: Bool { !isNull }

    public var priority: Priority? {
        switch self {
        case .leaf(_, let p): return p
        case .branch(let c, let p): return c.isEmpty ? nil : p
        }
    }

    public var leafValue: Leaf? {
        if case .leaf(let leaf, _) = self { return leaf }
        return nil
    }

    public var children: [String: Node] {
        if case .branch(let c, _) = self { return c }
        return [:]
    }

    public var hasChildren: Bool {
        if case .branch(let c, _) = self { return !c.isEmpty }
        return false
    }

    public func child(_ key: String) -> Node {
        // The length first: a String comparison that fails is not cheap, and this runs per lookup.
        if key.utf8.count == 9, key == ".priority" { return priority.map { .leaf($0.leaf, priority: nil) } ?? .null }
        if case .branch(let c, _) = self { return c[key] ?? .null }
        return .null
    }

    public func node(at path: Path) -> Node {
        var current = self
        for key in path.segments {
            current = current.child(key)
            if current.isNull { return .null }
        }
        return current
    }

    /// The same value with another priority (ignored for null).
    public func withPriority(_ priority: Priority?) -> Node {
        switch self {
        case .leaf(let l, _): return .leaf(l, priority: priority)
        case .branch(let c, _): return c.isEmpty ? .null : .branch(c, priority: priority)
        }
    }

    /// Replaces the value at `path`; a null value deletes it and prunes emptied parents.
    public mutating func set(_ value: Node, at path: Path) {
        set(value, at: path.segments[...])
    }

    private mutating func set(_ value: Node, at path: ArraySlice<String>) {
        guard let key = path.first else {
            self = value.isNull ? .null : value
            return
        }
        if key == ".priority" && path.count == 1 {
            self = withPriority(value.leafValue.flatMap(Priority.init(leaf:)))
            return
        }
        // Deleting below a primitive deletes nothing: the primitive stays (as the clients do).
        if value.isNull, leafValue != nil { return }
        var children: [String: Node]
        var priority: Priority?
        switch self {
        case .branch(let c, let p):
            children = c
            priority = p
        case .leaf(_, let p):
            children = [:]
            priority = p
        }
        self = .null  // drop our reference so `children` is uniquely referenced
        var child = children.removeValue(forKey: key) ?? .null
        child.set(value, at: path.dropFirst())
        if !child.isNull { children[key] = child }
        if children.isEmpty { priority = nil }
        self = .branch(children, priority: priority)
    }

    /// Number of stored nodes (leaves and branches), for limits and statistics.
    public var nodeCount: Int {
        switch self {
        case .leaf: return 1
        case .branch(let c, _): return c.values.reduce(c.isEmpty ? 0 : 1) { $0 + $1.nodeCount }
        }
    }
}

extension Priority {
    init?(leaf: Leaf) {
        switch leaf {
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .bool: return nil
        }
    }

    var leaf: Leaf {
        switch self {
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        }
    }
}
