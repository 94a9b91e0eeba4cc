/// A filtered query's result computed without sorting the location's children: a range alone is
/// one filtering pass (the result is an unordered branch), a limit keeps the best `limit` children
/// in a bounded heap. `limitToLast(3)` on 300,000 children is then one pass with about one
/// comparison per child, where `QuerySpec.apply` sorts and copies them all. The results are equal
/// (`QueryWindowTests` checks it on random data).
enum QueryWindow {
    /// The same value as `spec.apply(to: node)`.
    static func result(of spec: QuerySpec, at node: Node) -> Node {
        guard spec.isFiltered else { return node }
        guard case .branch(let children, _) = node, !children.isEmpty else { return .null }
        guard let limit = spec.limit else {
            var kept: [String: Node] = [:]
            for (key, child) in children where spec.contains(key, child) { kept[key] = child }
            return .branch(kept, priority: nil)
        }
        guard limit.count > 0 else { return .null }
        let selected = select(limit.count, from: children, spec: spec, largest: limit.direction == .last)
        var kept: [String: Node] = [:]
        kept.reserveCapacity(selected.count)
        for entry in selected { kept[entry.key] = entry.node }
        return .branch(kept, priority: nil)
    }

    struct Candidate {
        var key: String
        var node: Node
        var value: QueryOrder.Indexed
    }

    /// Children order under an index: the indexed value, then the key.
    static func less(_ a: Candidate, _ b: Candidate, index: QueryIndex) -> Bool {
        if index != .key {
            let byValue = QueryOrder.compare(a.value, b.value)
            if byValue != 0 { return byValue < 0 }
        }
        return QueryOrder.compareNames(a.key, b.key) < 0
    }

    /// The `count` smallest in-range children (the largest with `largest`), in no particular order.
    static func select(_ count: Int, from children: [String: Node], spec: QuerySpec, largest: Bool) -> [Candidate] {
        var selector = Selector(count, spec: spec, largest: largest, expected: children.count)
        for (key, child) in children { selector.offer(key, child) }
        return selector.heap
    }

    /// The selection one child at a time, so that it can be spread over several turns of the loop
    /// (`SlicedRead`). A binary heap holds the ones kept so far with the worst of them on top.
    struct Selector {
        let count: Int
        let spec: QuerySpec
        let largest: Bool
        private(set) var heap: [Candidate] = []

        init(_ count: Int, spec: QuerySpec, largest: Bool, expected: Int) {
            self.count = count
            self.spec = spec
            self.largest = largest
            heap.reserveCapacity(min(count, expected))
        }

        mutating func offer(_ key: String, _ child: Node) {
            let index = spec.index, largest = largest
            // `worse(a, b)`: a is further from the wanted end than b.
            func worse(_ a: Candidate, _ b: Candidate) -> Bool { largest ? less(a, b, index: index) : less(b, a, index: index) }
            if (spec.start != nil || spec.end != nil) && !spec.contains(key, child) { return }
            let value = QueryOrder.Indexed(child, index)
            if heap.count == count {
                // Most children lose to the worst one kept: decide that before building a candidate.
                let top = heap[0]
                if index != .key {
                    let byValue = QueryOrder.compare(value, top.value)
                    if byValue != 0 ? (byValue > 0) != largest : !beats(key, top.key, largest: largest) { return }
                } else if !beats(key, top.key, largest: largest) {
                    return
                }
                heap[0] = Candidate(key: key, node: child, value: value)
                siftDown(&heap, 0, worse)
            } else {
                heap.append(Candidate(key: key, node: child, value: value))
                siftUp(&heap, heap.count - 1, worse)
            }
        }

        /// The selected children as the query's result.
        var result: Node {
            var kept: [String: Node] = [:]
            kept.reserveCapacity(heap.count)
            for entry in heap { kept[entry.key] = entry.node }
            return kept.isEmpty ? .null : .branch(kept, priority: nil)
        }
    }

    /// Whether a key beats the kept one on a tie of values: smaller keys win for the first ones,
    /// larger for the last.
    private static func beats(_ key: String, _ kept: String, largest: Bool) -> Bool {
        let order = QueryOrder.compareNames(key, kept)
        return largest ? order > 0 : order < 0
    }

    /// Max-heap by `worse`: the worst candidate at the top.
    private static func siftUp(_ heap: inout [Candidate], _ start: Int, _ worse: (Candidate, Candidate) -> Bool) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard worse(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private static func siftDown(_ heap: inout [Candidate], _ start: Int, _ worse: (Candidate, Candidate) -> Bool) {
        var parent = start
        while true {
            var top = parent
            let left = 2 * parent + 1, right = left + 1
            if left < heap.count && worse(heap[left], heap[top]) { top = left }
            if right < heap.count && worse(heap[right], heap[top]) { top = right }
            guard top != parent else { return }
            heap.swapAt(parent, top)
            parent = top
        }
    }
}
