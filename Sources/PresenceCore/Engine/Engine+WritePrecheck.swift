extension Engine {
    /// Could `credentials` write at `path` of namespace `name` with some value? Asked before a REST
    /// body is read, so that a write the rules refuse whatever its value is refused before a byte
    /// of the body is buffered (see `RuleSet.mightAllowWrite`; `below`: the write may reach under
    /// `path`, as a PATCH or POST does). True for the admin, and for policies other than rules
    /// documents (they are only asked with the value). Creates no namespace.
    public func mightWrite(at path: Path, below: Bool, namespace name: String, credentials: Credentials, now: Int64) -> Bool {
        if credentials.isAdmin { return true }
        // Replicated, a namespace this node does not serve yet may have rules of its own in the log.
        if configuration.replication != nil, namespaces[name]?.replica?.serving != true { return true }
        let ns = existingNamespace(name)
        guard let rules = ns.policy as? RuleSet else { return true }
        return rules.mightAllowWrite(at: path, below: below, root: ns.root, auth: credentials.rulesAuth, now: now)
    }
}
