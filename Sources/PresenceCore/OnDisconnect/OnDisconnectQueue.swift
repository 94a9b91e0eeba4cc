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

/// A connection's onDisconnect ops with the client's `SparseSnapshotTree` semantics (§7.1):
/// a set at P replaces what is stored at or below P; a cancel at P forgets P and below, splitting
/// a value stored at an ancestor into its children. Running the ops in list order gives the same
/// result as the client's tree.
public struct OnDisconnectQueue: Sendable, Equatable {
    public private(set) var ops: [OnDisconnectOp] = []

    public init() {}

    /// A queue as storage kept it (ops already in run order).
    public init(restoring ops: [OnDisconnectOp]) { self.ops = ops }

    public var isEmpty: Bool { ops.isEmpty }
    public var count: Int { ops.count }

    public mutating func set(_ value: JSON, at path: Path, credentials: Credentials) {
        ops.removeAll { path.contains($0.path) }
        ops.append(OnDisconnectOp(path: path, value: value, credentials: credentials))
    }

    public mutating func update(_ children: [Request.Update], at path: Path, credentials: Credentials) {
        for child in children { set(child.value, at: path.appending(child.path), credentials: credentials) }
    }

    public mutating func cancel(_ path: Path) {
        ops.removeAll { path.contains($0.path) }
        // Split values stored above `path` so that only the part under `path` is forgotten.
        var index = 0
        while index < ops.count {
            let op = ops[index]
            guard op.path.contains(path), op.path != path else {
                index += 1
                continue
            }
            guard case .object(let members) = op.value, !members.contains(where: { $0.0 == ".sv" }) else {
                index += 1  // a leaf has nothing under `path` to forget
                continue
            }
            var replacement: [OnDisconnectOp] = []
            for (key, member) in members where !key.hasPrefix(".") {
                replacement.append(OnDisconnectOp(path: op.path.child(key), value: member, credentials: op.credentials))
            }
            ops.replaceSubrange(index...index, with: replacement)
            // Re-examine the split pieces: one of them may still be an ancestor of `path`.
            ops.removeAll { path.contains($0.path) }
        }
    }

    public mutating func removeAll() { ops.removeAll() }
}
