/// The recent history of one namespace's writes, for validating read sets at apply time
/// (docs/scaling.md, "The version window").
///
/// For every path written in the window it keeps the last revision written **at** it, the last
/// written **at or below** it, and the last whose write **reshaped** it from below (see
/// `WrittenPath`). Revisions older than `head - capacity` are forgotten: their nodes are pruned as
/// they leave the window, so memory follows the paths written in the last `capacity` revisions.
/// Recording and validating cost O(depth) dictionary lookups per path.
///
/// Determinism: every node applies every revision, in order, and records it here (an aborted or
/// empty entry records no paths). With the same `capacity` on every node, `validate` answers the
/// same on every node, except `missingHistory`: a window started at revision S (a node loaded a
/// snapshot at S) cannot judge bases before S that other nodes still can. Feed it revisions
/// `S - capacity + 1 ... S` from the log with `record` (not applied) before it validates.
public final class VersionWindow {
    public enum Validation: Sendable, Equatable {
        /// Nothing in `(base, head]` conflicts with the read set: commit.
        case valid
        /// Some revision in `(base, head]` wrote what the read set read: abort.
        case conflict
        /// `base` is below `floor` (forgotten) or above `head`: it cannot be checked on any node;
        /// abort, and the proposer evaluates again on a recent replica.
        case outOfWindow
        /// `base` is in the window but before this window's history starts: other nodes can
        /// decide, this one cannot. Not an abort: this node must catch up its history first.
        case missingHistory
    }

    public struct OutOfOrder: Error, Sendable, Equatable, CustomStringConvertible {
        public var head: UInt64
        public var rev: UInt64
        public var description: String { "version window at \(head) cannot record revision \(rev): revisions must follow one another" }
    }

    /// How many revisions back a `base` may lie. The same on every node.
    public let capacity: UInt64
    /// The last recorded revision.
    public private(set) var head: UInt64
    /// The revision the window's history starts after.
    public let historyStart: UInt64

    private let dataRoot = VersionNode()
    /// The parent of every virtual root (`.rules`, `.limits`); carries no versions itself.
    private let virtualRoot = VersionNode()
    /// What each revision still in the window wrote, oldest first (from `expiryStart`).
    private var expiry: [(rev: UInt64, writes: [WrittenPath])] = []
    private var expiryStart = 0

    public static let defaultCapacity: UInt64 = 10_000

    /// A window whose history starts after revision `head` (0: the log's beginning).
    public init(capacity: UInt64 = VersionWindow.defaultCapacity, head: UInt64 = 0) {
        self.capacity = capacity
        self.head = head
        historyStart = head
    }

    /// The oldest `base` that can still be validated: `head - capacity` (0 early on).
    public var floor: UInt64 { head >= capacity ? head - capacity : 0 }

    /// Records what revision `rev` (which must be `head + 1`) wrote; an aborted entry, or one of a
    /// kind that writes nothing, records `[]`.
    public func record(_ writes: [WrittenPath], rev: UInt64) throws(OutOfOrder) {
        guard head < UInt64.max, rev == head + 1 else { throw OutOfOrder(head: head, rev: rev) }
        for write in writes { mark(write, rev: rev) }
        if !writes.isEmpty { expiry.append((rev, writes)) }
        head = rev
        expire()
    }

    /// What each revision still in the window wrote (`(floor, head]`, revisions that wrote
    /// nothing left out): with `head` and `capacity`, all a snapshot needs to rebuild the window
    /// exactly (`init(capacity:head:history:)`), so that a node started from it validates
    /// every base in the window as the others do.
    public var history: [(rev: UInt64, writes: [WrittenPath])] { Array(expiry[expiryStart...]) }

    /// The window another node had at `head`, from its `history`: it validates exactly as that
    /// window did, bases back to `head - capacity` included.
    public convenience init(capacity: UInt64 = VersionWindow.defaultCapacity, head: UInt64,
                            history: [(rev: UInt64, writes: [WrittenPath])]) throws(OutOfOrder) {
        let start = head >= capacity ? head - capacity : 0
        self.init(capacity: capacity, head: start)
        var next = history.startIndex
        while next < history.endIndex, history[next].rev <= start { next += 1 }
        var rev = start
        while rev < head {
            rev += 1
            if next < history.endIndex, history[next].rev == rev {
                try record(history[next].writes, rev: rev)
                next += 1
            } else {
                try record([], rev: rev)
            }
        }
        guard next == history.endIndex else { throw OutOfOrder(head: head, rev: history[next].rev) }
    }

    /// Records plain paths, each as possibly reshaping all its ancestors (sound, less precise).
    public func record(writes: [Path], rev: UInt64) throws(OutOfOrder) {
        try record(writes.map { WrittenPath($0) }, rev: rev)
    }

    public func validate(_ readSet: ReadSet, base: UInt64) -> Validation {
        guard base >= floor, base <= head else { return .outOfWindow }
        guard base < head else { return .valid }
        guard base >= historyStart else { return .missingHistory }
        for path in readSet.subtrees {
            guard let node = walk(path, base: base) else { return .conflict }
            if let node, node.below > base { return .conflict }
        }
        for path in readSet.shapes {
            guard let node = walk(path, base: base) else { return .conflict }
            if let node, node.reshaped > base { return .conflict }
        }
        return .valid
    }

    /// True when the read set cannot be shown unchanged since `base` (anything but `valid`).
    public func conflicts(readSet: ReadSet, base: UInt64) -> Bool {
        validate(readSet, base: base) != .valid
    }

    /// Trie nodes held below the roots (for tests and metrics).
    public var nodeCount: Int { dataRoot.count + virtualRoot.count - 2 }

    // MARK: Internals

    /// Walks to `path`: nil when a node at or above it was written after `base` (a conflict);
    /// `.some(nil)` when no node exists for it (nothing in the window touched it); else its node.
    private func walk(_ path: Path, base: UInt64) -> VersionNode?? {
        let virtual = path.isVirtual
        var node = virtual ? virtualRoot : dataRoot
        if !virtual, node.at > base { return nil }
        for key in path.segments {
            guard let child = node.children[key] else { return .some(nil) }
            if child.at > base { return nil }
            node = child
        }
        return .some(node)
    }

    private func mark(_ write: WrittenPath, rev: UInt64) {
        let segments = write.path.segments
        var node = write.path.isVirtual ? virtualRoot : dataRoot
        node.below = rev
        if write.reshapedFrom == 0, !segments.isEmpty { node.reshaped = rev }
        for (index, key) in segments.enumerated() {
            let child: VersionNode
            if let existing = node.children[key] {
                child = existing
            } else {
                child = VersionNode()
                node.children[key] = child
            }
            child.below = rev
            let depth = index + 1
            if depth < segments.count, depth >= write.reshapedFrom { child.reshaped = rev }
            node = child
        }
        node.at = rev
    }

    /// Forgets the revisions at or below `floor`: each node they made whose newest revision is
    /// that old goes, with everything below it.
    private func expire() {
        let floor = max(self.floor, historyStart)
        while expiryStart < expiry.count, expiry[expiryStart].rev <= floor {
            for write in expiry[expiryStart].writes { prune(write.path, floor: floor) }
            expiryStart += 1
        }
        if expiryStart > 64, expiryStart * 2 > expiry.count {
            expiry.removeFirst(expiryStart)
            expiryStart = 0
        }
    }

    private func prune(_ path: Path, floor: UInt64) {
        let virtual = path.isVirtual
        var node = virtual ? virtualRoot : dataRoot
        if !virtual, node.below <= floor {
            node.reset()
            return
        }
        for key in path.segments {
            guard let child = node.children[key] else { return }
            if child.below <= floor {
                node.children[key] = nil
                return
            }
            node = child
        }
    }
}

/// One path's versions. `below >= at` and `below >= reshaped` always, and a parent's `below` is
/// at least its children's, so a node whose `below` left the window holds nothing still needed.
private final class VersionNode {
    var at: UInt64 = 0
    var below: UInt64 = 0
    var reshaped: UInt64 = 0
    var children: [String: VersionNode] = [:]

    func reset() {
        at = 0
        below = 0
        reshaped = 0
        children = [:]
    }

    var count: Int { children.values.reduce(1) { $0 + $1.count } }
}
