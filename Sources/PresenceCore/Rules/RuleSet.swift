/// A loaded, compiled security rules document (spec: docs/security-rules.md). Immutable and
/// `Sendable`: share one instance across threads; replace it wholesale on redeploy.
public struct RuleSet: Sendable {
    let root: RuleNode
    /// The loaded document as JSON (comments stripped), for `GET /.settings/rules.json`.
    public let document: JSON

    init(root: RuleNode, document: JSON) {
        self.root = root
        self.document = document
    }

    /// Loads a rules document. `source` names the file (or "REST PUT") for error messages.
    public static func load(text: String, source: String) throws(RulesLoadError) -> RuleSet {
        guard text.utf8.count <= RuleTreeBuilder.maxDocumentBytes else {
            throw RulesLoadError(source: source, rulePath: "", reason: "rules document larger than \(RuleTreeBuilder.maxDocumentBytes) bytes")
        }
        let document: JSON
        do {
            document = try RulesDocumentReader.parse(text)
        } catch {
            throw RulesLoadError(source: source, rulePath: "", position: error.offset,
                                 reason: "invalid JSON at line \(error.line), column \(error.column): \(error.reason)")
        }
        return try load(document: document, source: source)
    }

    /// Loads an already parsed rules document (e.g. from a REST body parsed elsewhere).
    public static func load(document: JSON, source: String) throws(RulesLoadError) -> RuleSet {
        let root = try RuleTreeBuilder(source: source).build(document: document)
        return RuleSet(root: root, document: document)
    }

    // swiftlint:disable force_try
    /// `{"rules":{".read":true,".write":true}}`
    public static let allowAll: RuleSet = try! load(text: #"{"rules":{".read":true,".write":true}}"#, source: "allowAll")
    /// `{"rules":{}}`: everything denied.
    public static let denyAll: RuleSet = try! load(text: #"{"rules":{}}"#, source: "denyAll")
    // swiftlint:enable force_try

    /// The `.indexOn` entries declared for the rule node matching `path` (empty when none).
    public func indexOn(_ path: Path) -> [String] {
        var node = root
        for key in path.segments {
            guard let next = node.child(key) else { return [] }
            node = next.node
        }
        return node.indexOn
    }

    static func authValue(_ auth: JSON?) -> RuleValue {
        guard let auth else { return .null }
        return RuleValue(auth)
    }

    /// Runs one rule: constant rules need no context.
    static func run(_ rule: CompiledRule, _ context: EvaluationContext) -> Result<Bool, RuleRuntimeError> {
        switch rule.body {
        case .constant(let b): return .success(b)
        case .expression(let e): return context.evaluate(e)
        }
    }
}
