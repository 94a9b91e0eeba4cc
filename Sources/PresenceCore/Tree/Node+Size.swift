extension Node {
    /// About how many bytes this value takes as JSON text (export format, priorities included),
    /// or nil as soon as that passes `budget`: the walk stops there, so checking a huge subtree
    /// against a budget costs O(budget), not O(subtree). Used to refuse a read before serializing it.
    public func estimatedJSONBytes(within budget: Int) -> Int? {
        var total = 0
        return Node.add(self, to: &total, budget: budget) ? total : nil
    }

    /// The same for REST `shallow=true`: each child as its key and `true` or its primitive value.
    public func estimatedShallowJSONBytes(within budget: Int) -> Int? {
        guard case .branch(let children, _) = self else { return estimatedJSONBytes(within: budget) }
        var total = 2
        for (key, child) in children {
            total += key.utf8.count + 4
            if let leaf = child.leafValue { total += Node.size(of: leaf) } else { total += 4 }
            if total > budget { return nil }
        }
        return total
    }

    private static func add(_ node: Node, to total: inout Int, budget: Int) -> Bool {
        switch node {
        case let .leaf(leaf, priority):
            total += size(of: leaf) + (priority == nil ? 0 : 24)
        case let .branch(children, priority):
            total += 2 + (priority == nil ? 0 : 24)
            for (key, child) in children {
                total += key.utf8.count + 4
                if total > budget || !add(child, to: &total, budget: budget) { return false }
            }
        }
        return total <= budget
    }

    private static func size(of leaf: Leaf) -> Int {
        switch leaf {
        case .bool: return 5
        case .number(let n):
            guard n == n.rounded(), abs(n) < 1e15 else { return 24 }
            var digits = n < 0 ? 2 : 1
            var rest = abs(Int64(n))
            while rest >= 10 {
                rest /= 10
                digits += 1
            }
            return digits
        case .string(let s): return s.utf8.count + 2
        }
    }
}
