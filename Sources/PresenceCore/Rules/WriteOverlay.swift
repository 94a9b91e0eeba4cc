/// The pending writes of one operation in canonical form: no path is a prefix of another, sorted
/// by path. The writes below any location are then a contiguous range, so `TreeView` can present
/// the post-write tree without copying the stored tree or building per-write indexes.
final class WriteOverlay: Sendable {
    let entries: [(segments: [String], value: Node)]

    /// Applies `writes` in order: a write replaces earlier writes below it and is merged into an
    /// earlier write above it.
    init(_ writes: [([String], Node)]) {
        var list: [(segments: [String], value: Node)] = []
        for (segments, value) in writes {
            if let i = list.firstIndex(where: { Self.isPrefix($0.segments, of: segments) }) {
                let relative = Path(validated: Array(segments[list[i].segments.count...]))
                list[i].value.set(value, at: relative)
                continue
            }
            list.removeAll { Self.isPrefix(segments, of: $0.segments) }
            list.append((segments, value))
        }
        if list.count > 1 { list.sort { Self.less($0.segments, $1.segments) } }
        entries = list
    }

    static func isPrefix(_ a: [String], of b: [String]) -> Bool {
        a.count <= b.count && a.indices.allSatisfy { a[$0] == b[$0] }
    }

    static func less(_ a: [String], _ b: [String]) -> Bool {
        for (x, y) in zip(a, b) where x != y { return x < y }
        return a.count < b.count
    }
}

/// A read-only view of a tree location: a base node plus the pending writes below it.
/// Without writes it is just the node; with writes it behaves like the node those writes produce
/// (`Node.set` semantics: deletes prune emptied parents, writing below a leaf turns it into a branch).
struct TreeView {
    /// The base value here (the written value if a write targeted exactly this location).
    var node: Node
    /// Writes strictly below this location: `overlay.entries[lower..<upper]`, all deeper than `depth`.
    private var overlay: WriteOverlay?
    private var lower = 0
    private var upper = 0
    private var depth = 0

    init(node: Node) { self.node = node }

    init(root: Node, writes: WriteOverlay) {
        if let only = writes.entries.first, only.segments.isEmpty {
            node = only.value
        } else {
            node = root
            if !writes.entries.isEmpty {
                overlay = writes
                upper = writes.entries.count
            }
        }
    }

    static let empty = TreeView(node: .null)

    var hasWritesBelow: Bool { overlay != nil }

    func child(_ key: String) -> TreeView {
        guard let overlay else { return TreeView(node: node.child(key)) }
        let entries = overlay.entries
        var low = lower
        if upper - lower > 8 {
            var high = upper
            while low < high {
                let mid = (low + high) / 2
                if entries[mid].segments[depth] < key { low = mid + 1 } else { high = mid }
            }
        }
        while low < upper, entries[low].segments[depth] < key { low += 1 }
        var high = low
        while high < upper, entries[high].segments[depth] == key { high += 1 }
        let baseChild: Node = node.leafValue != nil ? .null : node.child(key)
        if low == high { return TreeView(node: baseChild) }
        if high == low + 1, entries[low].segments.count == depth + 1 { return TreeView(node: entries[low].value) }
        var view = TreeView(node: baseChild)
        view.overlay = overlay
        view.lower = low
        view.upper = high
        view.depth = depth + 1
        return view
    }

    func descendant(_ segments: some Sequence<String>) -> TreeView {
        var view = self
        for key in segments {
            view = view.child(key)
            if view.overlay == nil && view.node.isNull { return .empty }
        }
        return view
    }

    var exists: Bool {
        guard overlay != nil else { return node.exists }
        return hasChildren
    }

    /// Keys written directly below this location (each once, in order).
    private var writtenKeys: [String] {
        guard let overlay else { return [] }
        var keys: [String] = []
        for i in lower..<upper {
            let key = overlay.entries[i].segments[depth]
            if keys.last != key { keys.append(key) }
        }
        return keys
    }

    var hasChildren: Bool {
        guard overlay != nil else { return node.hasChildren }
        let written = writtenKeys
        if case .branch(let base, _) = node, !base.isEmpty {
            if base.count > written.count { return true }
            for key in base.keys where !written.contains(key) { return true }
        }
        for key in written where child(key).exists { return true }
        return false
    }

    /// The primitive stored here, if this is a leaf.
    var leaf: Leaf? { overlay == nil ? node.leafValue : nil }

    var priority: Priority? {
        guard overlay != nil else { return node.priority }
        guard hasChildren else { return nil }
        switch node {
        case .leaf(_, let p), .branch(_, let p): return p
        }
    }

    /// Calls `body` for every existing child, base and written, until it returns false.
    func forEachChild(_ body: (String, TreeView) -> Bool) {
        guard overlay != nil else {
            for (key, child) in node.children where !body(key, TreeView(node: child)) { return }
            return
        }
        let written = writtenKeys
        if node.leafValue == nil {
            for (key, child) in node.children where !written.contains(key) {
                if !body(key, TreeView(node: child)) { return }
            }
        }
        for key in written {
            let view = child(key)
            if view.exists, !body(key, view) { return }
        }
    }

    /// The view as a plain node (copies the touched branches; used only for `.priority` writes).
    func materialize() -> Node {
        guard overlay != nil else { return node }
        var result: Node = node.leafValue != nil ? .null : node
        let priority = self.priority
        for key in writtenKeys {
            result.set(child(key).materialize(), at: Path(validated: [key]))
        }
        return result.isNull ? .null : result.withPriority(priority)
    }
}
