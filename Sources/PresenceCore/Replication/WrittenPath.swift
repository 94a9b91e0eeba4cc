/// One write as the version window records it: where it was, and which of its ancestors it
/// reshaped. A write changes everything at and below its path; above it, only ancestors whose
/// shape changed matter to shape reads, and those are always the deepest ones (from
/// `reshapedFrom` down to the parent).
public struct WrittenPath: Sendable, Equatable, CustomStringConvertible {
    public var path: Path
    /// The depth (number of keys) of the shallowest ancestor whose shape the write changed;
    /// `path.count` when it changed none.
    public var reshapedFrom: Int

    public init(path: Path, reshapedFrom: Int) {
        var path = path
        var reshapedFrom = reshapedFrom
        if !path.isVirtual, let priority = path.segments.firstIndex(of: ".priority") {
            // A priority write (`x/.priority`) changes x: record it as a write at x, conservatively.
            path = Path(validated: Array(path.segments[..<priority]))
            reshapedFrom = 0
        }
        self.path = path
        self.reshapedFrom = min(max(reshapedFrom, 0), path.count)
    }

    /// A write that may have reshaped every ancestor (always sound; costs aborts of shape reads above).
    public init(_ path: Path) {
        self.init(path: path, reshapedFrom: 0)
    }

    /// The exact record of `Node.set(value, at: path)` on `tree`, computed from the tree before the
    /// write. O(depth).
    public init(writing value: Node, at path: Path, over tree: Node) {
        let segments = path.segments
        if segments.last == ".priority" {
            self.init(path)
            return
        }
        var node = tree
        if value.isNull {
            // A delete changes nothing below a primitive or where nothing is; otherwise it prunes
            // each ancestor that held nothing else, from the parent up.
            var reshapedFrom = 0
            for (depth, key) in segments.enumerated() {
                guard case .branch(let children, _) = node, let child = children[key] else {
                    self.init(path: path, reshapedFrom: segments.count)
                    return
                }
                if children.count != 1 { reshapedFrom = depth + 1 }
                node = child
            }
            self.init(path: path, reshapedFrom: reshapedFrom)
        } else {
            // A value makes every ancestor a branch: those that were not one (absent, or a
            // primitive with nothing below) change shape.
            for (depth, key) in segments.enumerated() {
                guard case .branch(let children, _) = node, !children.isEmpty else {
                    self.init(path: path, reshapedFrom: depth)
                    return
                }
                node = children[key] ?? .null
            }
            self.init(path: path, reshapedFrom: segments.count)
        }
    }

    public var description: String { "\(path) (reshaped from depth \(reshapedFrom))" }
}
