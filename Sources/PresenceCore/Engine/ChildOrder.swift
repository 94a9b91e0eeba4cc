/// A location's children in one index's order, to work out how a write of one child moves many
/// filtered query windows there: the order is built once per write (and moved by one child), then
/// each window's change costs a few binary searches and is pushed as the children that entered,
/// left or changed in it, instead of a pass over the children and the whole window per query.
///
/// A window in this order is contiguous: the children in a query's range form one run (the bounds
/// are positions in the order), and a limit keeps the first or last `count` of that run.
struct ChildOrder {
    typealias Entry = QueryWindow.Candidate

    let index: QueryIndex
    private(set) var entries: [Entry]

    init(of node: Node, by index: QueryIndex) {
        self.index = index
        entries = node.children.map { Entry(key: $0.key, node: $0.value, value: QueryOrder.Indexed($0.value, index)) }
        entries.sort { QueryWindow.less($0, $1, index: index) }
    }

    /// Where `entry` is (or would be inserted): the number of entries before it.
    func position(of entry: Entry) -> Int {
        firstIndex { !QueryWindow.less($0, entry, index: index) }
    }

    /// The first index whose entry satisfies `predicate`, which holds for a suffix of the entries.
    private func firstIndex(where predicate: (Entry) -> Bool) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let middle = low + (high - low) / 2
            if predicate(entries[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// The positions `[lower, upper)` of `spec`'s window (`spec.index` is this order's index).
    func window(of spec: QuerySpec) -> Range<Int> {
        var lower = 0, upper = entries.count
        if let start = spec.start {
            let startOnly = QuerySpec(index: spec.index, start: start)
            lower = firstIndex { startOnly.contains($0.key, $0.node) }
        }
        if let end = spec.end {
            let endOnly = QuerySpec(index: spec.index, end: end)
            upper = max(lower, firstIndex { !endOnly.contains($0.key, $0.node) })
        }
        guard let limit = spec.limit else { return lower..<upper }
        let kept = min(max(limit.count, 0), upper - lower)
        return limit.direction == .first ? lower..<(lower + kept) : (upper - kept)..<upper
    }

    /// One child changed: the order before and after, and where that child was and is.
    struct Move {
        let key: String
        let before: ChildOrder
        let after: ChildOrder
        let oldPosition: Int?
        let newPosition: Int?
        let newNode: Node
    }

    /// This order (before the write) with child `key` moved from `oldNode` to `newNode`.
    func moving(_ key: String, from oldNode: Node, to newNode: Node) -> Move {
        var after = self
        var oldPosition: Int?
        if oldNode.exists {
            let at = position(of: Entry(key: key, node: oldNode, value: QueryOrder.Indexed(oldNode, index)))
            if at < entries.count, entries[at].key == key {
                oldPosition = at
                after.entries.remove(at: at)
            }
        }
        var newPosition: Int?
        if newNode.exists {
            let entry = Entry(key: key, node: newNode, value: QueryOrder.Indexed(newNode, index))
            let at = after.position(of: entry)
            after.entries.insert(entry, at: at)
            newPosition = at
        }
        return Move(key: key, before: self, after: after, oldPosition: oldPosition, newPosition: newPosition, newNode: newNode)
    }
}

extension ChildOrder.Move {
    /// What `spec`'s window gains, loses and sees change: each child that left it (as null), each
    /// that entered it, and the moved child when it is in the window now. Nil when more than
    /// `limit` children change (not expected from one child's move: the caller then pushes the
    /// whole window).
    func windowChanges(of spec: QuerySpec, limit: Int = 8) -> [(key: String, node: Node)]? {
        let old = before.window(of: spec), new = after.window(of: spec)
        // The other children keep their order: map both windows onto it.
        func rest(_ position: Int, without moved: Int?) -> Int {
            if let moved, moved < position { return position - 1 }
            return position
        }
        let was = rest(old.lowerBound, without: oldPosition)..<rest(old.upperBound, without: oldPosition)
        let now = rest(new.lowerBound, without: newPosition)..<rest(new.upperBound, without: newPosition)
        func other(_ at: Int) -> ChildOrder.Entry {
            guard let oldPosition, at >= oldPosition else { return before.entries[at] }
            return before.entries[at + 1]
        }
        /// The positions in `range` and not in `other`: the parts before and after it.
        func outside(_ range: Range<Int>, _ other: Range<Int>) -> [Range<Int>] {
            let beforeEnd = min(range.upperBound, other.lowerBound), afterStart = max(range.lowerBound, other.upperBound)
            return (beforeEnd > range.lowerBound ? [range.lowerBound..<beforeEnd] : [])
                + (range.upperBound > afterStart ? [afterStart..<range.upperBound] : [])
        }
        let left = outside(was, now), entered = outside(now, was)
        guard (left + entered).reduce(0, { $0 + $1.count }) <= limit else { return nil }
        var changes: [(key: String, node: Node)] = []
        for at in left.joined() { changes.append((other(at).key, .null)) }
        for at in entered.joined() { changes.append((other(at).key, other(at).node)) }
        let wasIn = oldPosition.map { old.contains($0) } ?? false
        let isIn = newPosition.map { new.contains($0) } ?? false
        if isIn {
            changes.append((key, newNode))
        } else if wasIn {
            changes.append((key, .null))
        }
        return changes
    }
}
