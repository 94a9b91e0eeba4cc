/// The ops of a large onDisconnect queue in a trie of path segments, at most one op per path, each
/// with its place in the run order. A set at P drops P's subtree and puts the op at P with the next
/// order; a cancel at P walks from the root to P, splitting ops stored above P (their pieces keep the
/// split op's order) and drops P's subtree. Each costs O(depth + ops removed or split), so a
/// connection that registers thousands of ops pays the same for the last as for the first.
///
/// The run order is (order, path): pieces of one split share an order and are disjoint, so ordering
/// them by path changes no result; it only makes the order the same as the list form's.
struct OnDisconnectIndex: Sendable {
    struct Entry: Sendable {
        var order: UInt64
        var value: JSON
        var credentials: Credentials
    }

    struct TrieNode: Sendable {
        var entry: Entry?
        var children: [String: TrieNode] = [:]

        var isEmpty: Bool { entry == nil && children.isEmpty }
    }

    private var root = TrieNode()
    /// Held only to tell whether this value has been copied: a change made to one of two copies
    /// copies every dictionary it goes through, so the n-th op would cost O(n).
    private var identity = Identity()
    final class Identity: Sendable {}
    private(set) var count = 0
    private var nextOrder: UInt64 = 0
    /// Changes journalled since the queue was last stored whole (see `OnDisconnectQueue.journalled`).
    var changesSinceStored = 0

    /// The ops of a list, in its order.
    init(_ ops: [OnDisconnectOp]) {
        for op in ops { _ = set(op) }
    }

    /// True when no copy of this value shares its nodes (`OnDisconnectQueue` keeps it so).
    mutating func isUniquelyHeld() -> Bool { isKnownUniquelyReferenced(&identity) }

    /// The ops in run order.
    var ops: [OnDisconnectOp] {
        var found: [(order: UInt64, op: OnDisconnectOp)] = []
        found.reserveCapacity(count)
        var segments: [String] = []
        func collect(_ node: TrieNode) {
            if let entry = node.entry {
                found.append((entry.order, OnDisconnectOp(path: Path(validated: segments), value: entry.value, credentials: entry.credentials)))
            }
            for (key, child) in node.children {
                segments.append(key)
                collect(child)
                segments.removeLast()
            }
        }
        collect(root)
        found.sort { $0.order != $1.order ? $0.order < $1.order : $0.op.path < $1.op.path }
        return found.map(\.op)
    }

    /// The ops at or below `path` and their bytes.
    func coverage(at path: Path) -> (count: Int, bytes: Int) {
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return (0, 0) }
            node = next
        }
        return Self.measure(node)
    }

    /// Puts `op` at its path, replacing what is stored there and below; returns the byte change.
    mutating func set(_ op: OnDisconnectOp) -> Int {
        let entry = Entry(order: nextOrder, value: op.value, credentials: op.credentials)
        nextOrder += 1
        var delta = OnDisconnectQueue.size(of: op.value)
        Self.descend(&root, op.path.segments[...]) { node in
            let (removed, bytes) = Self.measure(node)
            count -= removed
            delta -= bytes
            node = TrieNode(entry: entry)
            count += 1
        }
        return delta
    }

    /// Forgets `path` and below, splitting ops stored above it; nil when nothing changed, else the
    /// byte change.
    mutating func cancel(_ path: Path) -> Int? {
        var delta = 0
        var changed = false
        Self.cancel(in: &root, path.segments[...], count: &count, delta: &delta, changed: &changed)
        return changed ? delta : nil
    }

    private static func cancel(in node: inout TrieNode, _ segments: ArraySlice<String>, count: inout Int, delta: inout Int, changed: inout Bool) {
        guard let key = segments.first else {
            let (removed, bytes) = measure(node)
            if removed > 0 || !node.children.isEmpty {
                count -= removed
                delta -= bytes
                changed = changed || removed > 0
                node = TrieNode()
            }
            return
        }
        // An op stored here lies above `path`: split it into its children (a leaf stays whole).
        if let entry = node.entry, let members = OnDisconnectQueue.splittable(entry.value) {
            node.entry = nil
            count -= 1
            delta -= OnDisconnectQueue.size(of: entry.value)
            changed = true
            for (member, value) in members where node.children[member]?.entry == nil {
                node.children[member, default: TrieNode()].entry = Entry(order: entry.order, value: value, credentials: entry.credentials)
                count += 1
                delta += OnDisconnectQueue.size(of: value)
            }
        }
        guard node.children[key] != nil else { return }
        cancel(in: &node.children[key]!, segments.dropFirst(), count: &count, delta: &delta, changed: &changed)
        if node.children[key]!.isEmpty { node.children.removeValue(forKey: key) }
    }

    /// Runs `body` on the node at `segments`, creating the path to it.
    private static func descend(_ node: inout TrieNode, _ segments: ArraySlice<String>, _ body: (inout TrieNode) -> Void) {
        guard let key = segments.first else { return body(&node) }
        descend(&node.children[key, default: TrieNode()], segments.dropFirst(), body)
    }

    /// The ops in a subtree and their bytes.
    private static func measure(_ node: TrieNode) -> (count: Int, bytes: Int) {
        var count = 0, bytes = 0
        if let entry = node.entry {
            count = 1
            bytes = OnDisconnectQueue.size(of: entry.value)
        }
        for child in node.children.values {
            let (c, b) = measure(child)
            count += c
            bytes += b
        }
        return (count, bytes)
    }
}
