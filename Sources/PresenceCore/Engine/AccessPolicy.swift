/// The security rules as the engine sees them. `RuleSet` is the real implementation.
public protocol AccessPolicy: Sendable {
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool
    /// A read with a query, for rules that look at `query.*`.
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: QuerySpec) -> Bool
    /// `writes` are applied in order to `root` to form the one merged tree the rules see.
    func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool
    /// False when no read decision can depend on `auth`: a new token then cannot change what a
    /// connection may read, and its listens need no re-check.
    var readsDependOnAuth: Bool { get }
}

extension AccessPolicy {
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: QuerySpec) -> Bool {
        allowsRead(path, root: root, auth: auth, now: now)
    }

    public var readsDependOnAuth: Bool { true }
}

/// Everything allowed: for tests and for `--rules` set to open.
public struct OpenAccessPolicy: AccessPolicy {
    public init() {}
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool { true }
    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool { true }
    public var readsDependOnAuth: Bool { false }
}
