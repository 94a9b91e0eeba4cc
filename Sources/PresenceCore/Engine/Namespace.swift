/// One independent database (`ns`): its tree, its rules and its listeners.
final class Namespace {
    let name: String
    var root: Node = .null
    var policy: any AccessPolicy
    let listeners = ListenerIndex()

    init(name: String, policy: any AccessPolicy) {
        self.name = name
        self.policy = policy
    }
}
