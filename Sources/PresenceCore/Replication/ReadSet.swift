/// What a decision read from the stored tree: the read set of optimistic validation
/// (docs/scaling.md, "Read sets"). A decision made at revision `base` still holds at a later
/// revision when no write in between conflicts with its read set (`conflicts(with:)`).
///
/// Two kinds of read, each at a path P:
/// - **shape** of P: whether P exists, whether it is a leaf or a branch, the leaf's value and P's
///   priority. Not which children a branch has nor their values. `exists()`, `val()` (a branch's
///   `val()` is an opaque marker), `isString()` …, `hasChildren()`, `getPriority()`, and
///   `hasChild(k)` (the shape of P/k) read shapes. A write conflicts when it is at or above P, or
///   below P and it changed P's shape (created, emptied or turned a leaf into a branch).
/// - **subtree** at P: anything at or below P. A write conflicts when it is at, above or below P.
///   Transactions (the data hash), a `.priority` write (it copies the value) and `newData` where a
///   pending delete below leaves the result to the stored siblings read subtrees.
///
/// Paths whose first key starts with "." (never a data key) name state beside the tree, each its
/// own root: `.rules` and `.limits/<limit>/<uid>` (`VirtualPaths`). A write at the data root does
/// not conflict with them. A data path containing `.priority` is the priority of the node before
/// it, so it is recorded as that node's shape.
///
/// The set stays compact: a path at or below a recorded subtree adds nothing.
public struct ReadSet: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case shape
        case subtree
    }

    /// Sorted; none at or below another.
    public private(set) var subtrees: [Path] = []
    /// Sorted; none at or below a subtree.
    public private(set) var shapes: [Path] = []

    public init() {}

    /// Reads are recorded at most this deep (deeper ones as the subtree above); written paths
    /// are at most a request path plus an update's key path.
    public static let maxPathDepth = 2 * Path.maxDepth

    public init(subtrees: [Path] = [], shapes: [Path] = []) {
        for path in subtrees { insert(path, .subtree) }
        for path in shapes { insert(path, .shape) }
    }

    /// The whole data tree: what a decision that cannot say what it read depends on.
    public static let wholeTree = ReadSet(subtrees: [.root])

    public var isEmpty: Bool { subtrees.isEmpty && shapes.isEmpty }

    public var count: Int { subtrees.count + shapes.count }

    public mutating func insert(_ path: Path, _ kind: Kind) {
        var path = path
        var kind = kind
        if !path.isVirtual, let priority = path.segments.firstIndex(of: ".priority") {
            path = Path(validated: Array(path.segments[..<priority]))
            kind = .shape
        }
        let index = Self.lowerBound(path, in: subtrees)
        if index < subtrees.count, subtrees[index] == path { return }
        // In a compact set, a subtree holding `path` sorts right before it.
        if index > 0, subtrees[index - 1].contains(path), subtrees[index - 1].sharesRoot(with: path) { return }
        switch kind {
        case .subtree where path.isRoot:
            // The data root holds every data path, but not the virtual ones sorted among them.
            subtrees.removeAll { !$0.isVirtual }
            shapes.removeAll { !$0.isVirtual }
            subtrees.insert(path, at: 0)
        case .subtree:
            var end = index
            while end < subtrees.count, path.contains(subtrees[end]) { end += 1 }
            subtrees.replaceSubrange(index..<end, with: [path])
            let first = Self.lowerBound(path, in: shapes)
            var last = first
            while last < shapes.count, path.contains(shapes[last]) { last += 1 }
            shapes.removeSubrange(first..<last)
        case .shape:
            let at = Self.lowerBound(path, in: shapes)
            if at < shapes.count, shapes[at] == path { return }
            shapes.insert(path, at: at)
        }
    }

    public mutating func formUnion(_ other: ReadSet) {
        for path in other.subtrees { insert(path, .subtree) }
        for path in other.shapes { insert(path, .shape) }
    }

    /// Does `write` (applied after the decision) possibly change what the decision read?
    public func conflicts(with write: WrittenPath) -> Bool {
        let target = write.path
        for path in subtrees where path.sharesRoot(with: target) {
            if target.contains(path) || path.contains(target) { return true }
        }
        for path in shapes where path.sharesRoot(with: target) {
            if target.contains(path) { return true }
            if path.count < target.count, path.count >= write.reshapedFrom, path.contains(target) { return true }
        }
        return false
    }

    public var description: String {
        let items = subtrees.map { "subtree " + $0.description } + shapes.map { "shape " + $0.description }
        return "{" + items.joined(separator: ", ") + "}"
    }

    /// The first index whose path is not below `path` in `Path` order. Paths below a path follow it
    /// directly in that order, so a subtree's members are one contiguous range.
    static func lowerBound(_ path: Path, in sorted: [Path]) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] < path { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
