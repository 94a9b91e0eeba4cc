/// An access policy that can say what its write decisions read, for the replicated engine: the
/// proposer records the read set and ships it in the `LogEntry`.
public protocol ReadRecordingAccessPolicy: AccessPolicy {
    /// `allowsWrite`, adding to `readSet` what the decision read: its data reads and
    /// `VirtualPaths.rules` (a decision made under the namespace's rules holds only while they do).
    func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64, recording readSet: inout ReadSet) -> Bool
}

extension AccessPolicy {
    /// For any policy: one that cannot record its reads counts as reading the whole tree.
    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64, recording readSet: inout ReadSet) -> Bool {
        if let policy = self as? any ReadRecordingAccessPolicy {
            return policy.allowsWrite(writes, root: root, auth: auth, now: now, recording: &readSet)
        }
        readSet.formUnion(.wholeTree)
        readSet.insert(VirtualPaths.rules, .shape)
        return allowsWrite(writes, root: root, auth: auth, now: now)
    }
}

extension RuleSet: ReadRecordingAccessPolicy {
    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64, recording readSet: inout ReadSet) -> Bool {
        readSet.insert(VirtualPaths.rules, .shape)
        return canWrite(writes, root: root, auth: auth, now: now, recording: &readSet).allowed
    }
}

extension OpenAccessPolicy: ReadRecordingAccessPolicy {
    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64, recording readSet: inout ReadSet) -> Bool {
        readSet.insert(VirtualPaths.rules, .shape)
        return true
    }
}

extension LimitDefinition {
    /// `tier`, adding to `readSet` what the conditions it tried read (in order, up to the first true).
    public func tier(auth: JSON?, root: Node, now: Int64, recording readSet: inout ReadSet) -> LimitTier? {
        tiers.first { $0.condition.evaluate(auth: auth, root: root, now: now, recording: &readSet) }
    }
}
