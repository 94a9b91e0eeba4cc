/// Pushing a filtered query's change instead of its whole window, when a write changes one child
/// of a location that many distinct queries watch (`ChildOrder`).
extension Engine {
    /// One order per location and index, shared by every query there that orders by that index.
    struct OrderKey: Hashable {
        let path: Path
        let index: QueryIndex
    }

    /// The order of a location's children before the writes, and the one child they change.
    struct PendingOrder {
        let order: ChildOrder
        let child: String
        let oldNode: Node
    }

    /// What a write pushes for one filtered query: its whole result, or (to tagged listeners) only
    /// the children of its window that entered, left (as null) or changed.
    enum QueryPush {
        case whole(Node)
        case changes([Outbound.Change])
    }

    /// Before the writes: for each location and index where the writes change exactly one child and
    /// enough distinct filtered queries watch, that location's children in order. Sorting the n
    /// children once costs about n·log2(n) comparisons where a whole window per query costs about n
    /// each, so an order is built only for more than log2(n) queries; fewer are computed whole.
    static func ordersForChanges(_ changes: [QueryKey: QueryChange], root: Node) -> [OrderKey: PendingOrder] {
        var queries: [OrderKey: (child: String, count: Int)] = [:]
        for (key, change) in changes where !change.covered && key.spec.isFiltered {
            guard let child = change.children.first?.key, change.children.allSatisfy({ $0.key == child }) else { continue }
            let orderKey = OrderKey(path: key.path, index: key.spec.index)
            if let known = queries[orderKey] {
                queries[orderKey] = (child, known.count + (known.child == child ? 1 : 0))
            } else {
                queries[orderKey] = (child, 1)
            }
        }
        var orders: [OrderKey: PendingOrder] = [:]
        for (orderKey, watched) in queries {
            let location = root.node(at: orderKey.path)
            let size = location.children.count
            let log2Size = Int.bitWidth - 1 - max(size, 2).leadingZeroBitCount
            guard watched.count > log2Size else { continue }
            orders[orderKey] = PendingOrder(order: ChildOrder(of: location, by: orderKey.index), child: watched.child,
                                            oldNode: location.child(watched.child))
        }
        return orders
    }

    /// After the writes: each order moved by its child's new value.
    static func moves(of orders: [OrderKey: PendingOrder], root: Node) -> [OrderKey: ChildOrder.Move] {
        var moves: [OrderKey: ChildOrder.Move] = [:]
        for (orderKey, pending) in orders {
            let newNode = root.node(at: orderKey.path).child(pending.child)
            moves[orderKey] = pending.order.moving(pending.child, from: pending.oldNode, to: newNode)
        }
        return moves
    }

    /// The push for query `key` (nil: nothing it shows changed), from its location's move when
    /// there is one, else computed whole.
    func queryPush(for key: QueryKey, change: QueryChange, move: ChildOrder.Move?, location: Node) -> QueryPush? {
        guard change.mayChange(key.spec, at: location) else { return nil }
        if let move, let changed = move.windowChanges(of: key.spec) {
            counters.queryWindowChangesComputed += 1
            if changed.isEmpty { return nil }
            return .changes(changed.map { Outbound.Change(path: Path(validated: [$0.key]), value: $0.node) })
        }
        counters.queryResultsComputed += 1
        return .whole(QueryWindow.result(of: key.spec, at: location))
    }
}
