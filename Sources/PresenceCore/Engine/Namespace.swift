/// One independent database (`ns`): its tree, its rules and its listeners.
final class Namespace {
    let name: String
    var root: Node = .null
    var policy: any AccessPolicy
    /// Rules set for this namespace alone (REST `PUT /.settings/rules.json`); they survive a
    /// reload of the rules file, which only replaces the default.
    var ownRules: RuleSet?
    /// The rules document as uploaded (comments kept), when set through REST.
    var ownRulesText: String?
    let listeners = ListenerIndex()
    var onlineIndex = OnlineIndex()

    init(name: String, policy: any AccessPolicy) {
        self.name = name
        self.policy = policy
    }
}
