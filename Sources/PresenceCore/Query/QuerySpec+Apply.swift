extension QuerySpec {
    /// The query's result at its location, as the JS client's view filters compute it
    /// (`RangedFilter`, `LimitedFilter`):
    /// * an unfiltered query (`isFiltered` false, whatever the index) returns `node` unchanged,
    ///   priorities included, leaf or not;
    /// * a filtered query returns a branch of the children in range, then only the first or last
    ///   `limit` of them in index order. Children keep their priorities; the location's own
    ///   priority is dropped ("queries don't support priorities"). A leaf or null location gives
    ///   `Node.null`, as the JS filters turn a leaf into the empty node.
    public func apply(to node: Node) -> Node {
        guard isFiltered else { return node }
        var children: [String: Node] = [:]
        for (key, child) in window(of: node) { children[key] = child }
        return .branch(children, priority: nil)
    }

    /// The children of the result in index order: for an unfiltered query all children of `node`,
    /// for a filtered one those `apply(to:)` keeps. Empty for a leaf or null.
    public func window(of node: Node) -> [(String, Node)] {
        var ordered = QueryOrder.sortedChildren(of: node, by: index)
        if start != nil || end != nil {
            ordered.removeAll { !contains($0.0, $0.1) }
        }
        if let limit, ordered.count > limit.count {
            switch limit.direction {
            case .first: ordered.removeSubrange(limit.count...)
            case .last: ordered.removeSubrange(..<(ordered.count - limit.count))
            }
        }
        return ordered
    }

    /// True when the child `key` with value `child` lies within the range (limits aside).
    public func contains(_ key: String, _ child: Node) -> Bool {
        if let start {
            let order = compare(start, isStart: true, to: key, child)
            if start.inclusive ? order > 0 : order >= 0 { return false }
        }
        if let end {
            let order = compare(end, isStart: false, to: key, child)
            if end.inclusive ? order < 0 : order <= 0 { return false }
        }
        return true
    }

    /// The bound's name when it gives none: a bound with no name is as wide as it can be when
    /// inclusive (start `[MIN_NAME]`, end `[MAX_NAME]`) and excludes every child holding its value
    /// when exclusive (start `[MAX_NAME]`, end `[MIN_NAME]`), which is what `startAfter(v)` and
    /// `endBefore(v)` mean; the JS SDK sends those names explicitly.
    public static func effectiveName(of bound: QueryBound, isStart: Bool) -> String {
        if let name = bound.name { return name }
        return isStart == bound.inclusive ? QueryOrder.minName : QueryOrder.maxName
    }

    /// Three-way comparison of the bound (the JS "post") with a child under this query's index.
    private func compare(_ bound: QueryBound, isStart: Bool, to key: String, _ child: Node) -> Int {
        if index == .key { return QueryOrder.compareNames(Self.keyIndexName(bound.value), key) }
        let byValue = QueryOrder.compare(QueryOrder.Indexed(bound.value), QueryOrder.Indexed(child, index))
        if byValue != 0 { return byValue }
        return QueryOrder.compareNames(Self.effectiveName(of: bound, isStart: isStart), key)
    }

    /// With the key index the bound value is the key. The parsers only accept strings there; a
    /// hand-built spec with another value compares as its JSON text (null as `[MIN_NAME]`).
    private static func keyIndexName(_ value: QueryValue) -> String {
        switch value {
        case .string(let s): return s
        case .null: return QueryOrder.minName
        default: return JSONWriter.string(value.json)
        }
    }
}
