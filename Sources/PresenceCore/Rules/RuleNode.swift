/// One compiled `.read` / `.write` / `.validate` rule.
struct CompiledRule: Sendable {
    enum Body: Sendable {
        case constant(Bool)
        case expression(CompiledExpression)
    }

    var body: Body
    /// Where it sits in the document, e.g. `/rules/users/$uid/.write`.
    var rulePath: String
    /// Precomputed decision reason when this rule grants ("write allowed by /rules/…/.write").
    var grantReason: String
    /// Whether the expression reads `data` / `newData` (the walk only computes the views it needs).
    var usesData: Bool
    var usesNewData: Bool

    init(body: Body, rulePath: String) {
        self.body = body
        self.rulePath = rulePath
        if case .expression(let e) = body {
            usesData = e.references(.data)
            usesNewData = e.references(.newData)
        } else {
            usesData = false
            usesNewData = false
        }
        let kind = rulePath.hasSuffix(".read") ? "read" : "write"
        grantReason = "\(kind) allowed by \(rulePath)"
    }
}

/// A node of the compiled rule tree: the rules for one location pattern and its children.
final class RuleNode: Sendable {
    let read: CompiledRule?
    let write: CompiledRule?
    let validate: CompiledRule?
    let indexOn: [String]
    let children: [String: RuleNode]
    /// The `$name` child and its name (with the `$`).
    let wildcardName: String?
    let wildcard: RuleNode?
    /// True when some node strictly below has a `.validate`.
    let validatesBelow: Bool
    /// The node's place in the document, e.g. `/rules/users/$uid`.
    let rulePath: String

    init(read: CompiledRule?, write: CompiledRule?, validate: CompiledRule?, indexOn: [String],
         children: [String: RuleNode], wildcardName: String?, wildcard: RuleNode?, rulePath: String) {
        self.read = read
        self.write = write
        self.validate = validate
        self.indexOn = indexOn
        self.children = children
        self.wildcardName = wildcardName
        self.wildcard = wildcard
        self.rulePath = rulePath
        validatesBelow = children.values.contains { $0.validate != nil || $0.validatesBelow }
            || wildcard.map { $0.validate != nil || $0.validatesBelow } ?? false
    }

    /// The rule node for `key`: the literal child if there is one, else the wildcard.
    @inline(__always)
    func child(_ key: String) -> (node: RuleNode, binds: Bool)? {
        if let literal = children[key] { return (literal, false) }
        if let wildcard { return (wildcard, true) }
        return nil
    }
}
