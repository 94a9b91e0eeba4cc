/// One stored onDisconnect write: replace the value at `path` with `value` (null deletes).
/// Server values stay unresolved until the op runs.
public struct OnDisconnectOp: Sendable, Equatable {
    public var path: Path
    public var value: JSON
    /// The credentials at registration: the op runs with them, so an offline write is never lost
    /// to a token that expired while the app was connected (see docs/architecture.md).
    public var credentials: Credentials

    public init(path: Path, value: JSON, credentials: Credentials) {
        self.path = path
        self.value = value
        self.credentials = credentials
    }
}

/// One edit of a queue, as the journal records it for a queue too large to store whole each time.
public enum OnDisconnectChange: Sendable, Equatable {
    case set(OnDisconnectOp)
    case cancel(Path)
}

/// A connection's onDisconnect ops with the client's `SparseSnapshotTree` semantics (§7.1):
/// a set at P replaces what is stored at or below P; a cancel at P forgets P and below, splitting
/// a value stored at an ancestor into its children. Running the ops in list order gives the same
/// result as the client's tree.
///
/// Nearly every connection holds one op or none, so a queue is a plain list (8 bytes, one small
/// allocation) up to `maxListed` ops; past that it moves to a trie of paths (`OnDisconnectIndex`),
/// so that registering or cancelling the n-th op costs O(depth + what it removes), not O(n). Both
/// forms give the same ops in the same order (split pieces by path), which the tests check.
public struct OnDisconnectQueue: Sendable, Equatable {
    static let maxListed = 32

    /// One pointer either way (the trie is boxed), so a connection pays 8 bytes for its queue.
    private enum Storage: Sendable {
        case listed([OnDisconnectOp])
        indirect case indexed(OnDisconnectIndex)
    }

    private var storage: Storage = .listed([])

    public init() {}

    /// A queue as storage kept it (ops already in run order).
    public init(restoring ops: [OnDisconnectOp]) {
        storage = ops.count > Self.maxListed ? .indexed(OnDisconnectIndex(ops)) : .listed(ops)
    }

    /// The ops in the order they run.
    public var ops: [OnDisconnectOp] {
        switch storage {
        case .listed(let ops): return ops
        case .indexed(let index): return index.ops
        }
    }

    public var isEmpty: Bool { count == 0 }

    public var count: Int {
        switch storage {
        case .listed(let ops): return ops.count
        case .indexed(let index): return index.count
        }
    }

    /// True once the queue is large enough to be journalled as changes rather than whole.
    var isIndexed: Bool {
        if case .indexed = storage { return true }
        return false
    }

    public static func == (a: OnDisconnectQueue, b: OnDisconnectQueue) -> Bool { a.ops == b.ops }

    /// Stores a set; returns the change in stored value bytes (`OnDisconnectQueue.size(of:)`).
    @discardableResult
    public mutating func set(_ value: JSON, at path: Path, credentials: Credentials) -> Int {
        let op = OnDisconnectOp(path: path, value: value, credentials: credentials)
        if let delta = withIndex({ $0.set(op) }) { return delta }
        var ops = takeList()
        var delta = Self.size(of: value)
        ops.removeAll { removed in
            guard path.contains(removed.path) else { return false }
            delta -= Self.size(of: removed.value)
            return true
        }
        ops.append(op)
        storage = ops.count > Self.maxListed ? .indexed(OnDisconnectIndex(ops)) : .listed(ops)
        return delta
    }

    /// Runs `body` on the trie taken out of its box (nil when the queue is a list), so that the
    /// trie holds the only reference to its nodes while it changes. Matching `storage` in place
    /// (`switch storage { case .indexed(var index): ...`) kept the box alive for the whole match,
    /// a second reference to every node: each change copied the dictionaries it went through, and
    /// the n-th op of a connection cost O(n) (issue 16, found by profiling many-ondisconnect).
    private mutating func withIndex<Result>(_ body: (inout OnDisconnectIndex) -> Result) -> Result? {
        guard isIndexed else { return nil }
        var taken = Storage.listed([])
        swap(&taken, &storage)
        // Out of the box by a function that takes it: the box is gone when it returns.
        guard var index = Self.trie(of: consume taken) else { preconditionFailure("checked above") }
        let result = body(&index)
        storage = .indexed(index)
        return result
    }

    /// Whether the trie is the only holder of its nodes while it changes (nil: a list). Tests.
    mutating func trieIsUniquelyHeldWhileChanging() -> Bool? {
        withIndex { $0.isUniquelyHeld() }
    }

    /// The list, taken out of `storage` so it is uniquely referenced while it changes.
    private mutating func takeList() -> [OnDisconnectOp] {
        var taken = Storage.listed([])
        swap(&taken, &storage)
        guard case .listed(let ops) = consume taken else { preconditionFailure("a list was expected") }
        return ops
    }

    private static func trie(of storage: consuming Storage) -> OnDisconnectIndex? {
        guard case .indexed(let index) = storage else { return nil }
        return index
    }

    @discardableResult
    public mutating func update(_ children: [Request.Update], at path: Path, credentials: Credentials) -> Int {
        var delta = 0
        for child in children { delta += set(child.value, at: path.appending(child.path), credentials: credentials) }
        return delta
    }

    /// Forgets `path` and below; returns nil when nothing changed, else the change in stored bytes.
    @discardableResult
    public mutating func cancel(_ path: Path) -> Int? {
        if let delta = withIndex({ $0.cancel(path) }) { return delta }
        var ops = takeList()
        let delta = Self.cancel(path, in: &ops)
        storage = .listed(ops)
        return delta
    }

    /// The ops at or below `path` and their bytes: what a set at `path` would replace.
    public func coverage(at path: Path) -> (count: Int, bytes: Int) {
        switch storage {
        case .listed(let ops):
            var count = 0, bytes = 0
            for op in ops where path.contains(op.path) {
                count += 1
                bytes += Self.size(of: op.value)
            }
            return (count, bytes)
        case .indexed(let index):
            return index.coverage(at: path)
        }
    }

    /// Replays a journalled change.
    public mutating func apply(_ change: OnDisconnectChange) {
        switch change {
        case .set(let op): set(op.value, at: op.path, credentials: op.credentials)
        case .cancel(let path): cancel(path)
        }
    }

    public mutating func removeAll() { storage = .listed([]) }

    /// Journal bookkeeping of an indexed queue: `changes` more were journalled since the queue
    /// was last stored whole. True when it is time to store it whole again (the changes then
    /// outnumber the ops, so replaying them at start-up stays proportional to the queue).
    mutating func journalled(changes: Int) -> Bool {
        withIndex { index in
            index.changesSinceStored += changes
            let due = index.changesSinceStored > max(64, index.count)
            if due { index.changesSinceStored = 0 }
            return due
        } ?? true
    }

    /// The list form of a cancel. Split pieces go where the split op was, in path order, and a
    /// piece is dropped where a (necessarily later) op already sits at its path: the same ops as
    /// the indexed form.
    static func cancel(_ path: Path, in ops: inout [OnDisconnectOp]) -> Int? {
        var delta = 0
        var changed = false
        func forgetAtOrBelow() {
            ops.removeAll { removed in
                guard path.contains(removed.path) else { return false }
                delta -= size(of: removed.value)
                changed = true
                return true
            }
        }
        forgetAtOrBelow()
        // Split values stored above `path` so that only the part under `path` is forgotten.
        var index = 0
        while index < ops.count {
            let op = ops[index]
            guard op.path.contains(path), op.path != path, let members = splittable(op.value) else {
                index += 1  // not above `path`, or a leaf: it has nothing under `path` to forget
                continue
            }
            var replacement: [OnDisconnectOp] = []
            for (key, member) in members {
                let piece = op.path.child(key)
                if ops.contains(where: { $0.path == piece }) { continue }
                replacement.append(OnDisconnectOp(path: piece, value: member, credentials: op.credentials))
                delta += size(of: member)
            }
            delta -= size(of: op.value)
            changed = true
            ops.replaceSubrange(index...index, with: replacement.sorted { $0.path < $1.path })
            // Re-examine the split pieces: one of them may still be an ancestor of `path`.
            forgetAtOrBelow()
        }
        return changed ? delta : nil
    }

    /// The members an op's value splits into (last of a repeated key, in key order, without
    /// `.priority`/`.value`), or nil for a value that does not split (a primitive, a server value).
    static func splittable(_ value: JSON) -> [(String, JSON)]? {
        guard case .object(let members) = value, !members.contains(where: { $0.0 == ".sv" }) else { return nil }
        var last: [String: JSON] = [:]
        for (key, member) in members where !key.hasPrefix(".") { last[key] = member }
        return last.sorted { $0.key < $1.key }
    }

    /// An op value's size, about its length as JSON text: what the per-connection byte limit counts.
    public static func size(of value: JSON) -> Int {
        switch value {
        case .null: return 4
        case .bool: return 5
        case .number: return 8
        case .string(let s): return s.utf8.count + 2
        case .array(let elements): return elements.reduce(2) { $0 + size(of: $1) + 1 }
        case .object(let members): return members.reduce(2) { $0 + $1.0.utf8.count + 4 + size(of: $1.1) }
        }
    }
}
