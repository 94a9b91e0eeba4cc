/// The security rules as the engine sees them. `RuleSet` is the real implementation.
public protocol AccessPolicy: Sendable {
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool
    /// A read with a query, for rules that look at `query.*`.
    func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: QuerySpec) -> Bool
    /// `writes` are applied in order to `root` to form the one merged tree the rules see.
    func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool
}

extension AccessPolicy {
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: QuerySpec) -> Bool {
        allowsRead(path, root: root, auth: auth, now: now)
    }
}

/// Everything allowed: for tests and for `--rules` set to open.
public struct OpenAccessPolicy: AccessPolicy {
    public init() {}
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool { true }
    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool { true }
}
