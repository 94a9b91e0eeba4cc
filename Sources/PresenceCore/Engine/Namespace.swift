/// One independent database (`ns`): its tree, its rules and its listeners.
final class Namespace {
    let name: String
    var root: Node = .null
    var policy: any AccessPolicy {
        didSet { readsDependOnAuth = policy.readsDependOnAuth }
    }
    /// `policy.readsDependOnAuth`, worked out once per rules change rather than per `auth`.
    private(set) var readsDependOnAuth: Bool
    /// Rules set for this namespace alone (REST `PUT /.settings/rules.json`); they survive a
    /// reload of the rules file, which only replaces the default.
    var ownRules: RuleSet?
    /// The rules document as uploaded (comments kept), when set through REST.
    var ownRulesText: String?
    let listeners = ListenerIndex()
    var onlineIndex = OnlineIndex()
    /// Connections (and streams) open on it: while there is one, it stays in memory.
    var connectionCount = 0
    /// Whether it holds data or rules of its own, as last counted in `Engine.namespacesHoldingData`.
    var countedAsHoldingData = false
    /// Replicated mode: the replica's bookkeeping (its version window, whether it is caught up).
    var replica: ReplicaState?

    /// Data or rules of its own: what keeps a namespace in memory (and counts against the cap).
    var holdsData: Bool { !root.isNull || ownRules != nil }

    init(name: String, policy: any AccessPolicy) {
        self.name = name
        self.policy = policy
        self.readsDependOnAuth = policy.readsDependOnAuth
    }
}
