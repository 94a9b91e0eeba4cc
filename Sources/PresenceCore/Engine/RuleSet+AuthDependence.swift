/// Whether a rules document's read decisions can depend on `auth`: when none of its `.read` rules
/// mentions `auth`, re-authenticating cannot change what a connection may read.
extension RuleSet {
    public var readsDependOnAuth: Bool { root.readsReference(.auth) }
}

extension RuleNode {
    func readsReference(_ variable: CompiledExpression.Variable) -> Bool {
        if case .expression(let expression)? = read?.body, expression.references(variable) { return true }
        return children.values.contains { $0.readsReference(variable) } || wildcard?.readsReference(variable) == true
    }
}
