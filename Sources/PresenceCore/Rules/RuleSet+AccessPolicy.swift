/// `RuleSet` is the engine's real `AccessPolicy` (see Engine/AccessPolicy.swift).
extension RuleSet: AccessPolicy {
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool {
        canRead(path, root: root, auth: auth, now: now).allowed
    }

    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool {
        canWrite(writes, root: root, auth: auth, now: now).allowed
    }
}
