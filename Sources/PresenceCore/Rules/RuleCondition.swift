/// One standalone expression of the rules language, outside a rules tree: the tiers of a limits
/// file use it (`auth.token.subscription == 'lite'`, `now - auth.token.created_at < 7200000`).
///
/// It sees `auth`, `now` and `root` (the namespace's data) with the same semantics as a `.read`
/// rule at the root; `data` is the root too and `newData` is not available. A run-time error makes
/// it false, as in rules.
public struct RuleCondition: Sendable {
    public let source: String
    let expression: CompiledExpression

    /// Compiles `source`. The error names the file (`file`), where in it (`location`, e.g.
    /// `/limits/refresh/tiers/0/when`), the 1-based position and the reason, as rules errors do.
    public init(_ source: String, file: String, location: String) throws(RulesLoadError) {
        do {
            expression = try ExpressionCompiler.compile(source, wildcards: [], allowsNewData: false)
        } catch {
            let excerpt = source.count > 120 ? String(source.prefix(117)) + "..." : source
            throw RulesLoadError(source: file, rulePath: location, position: error.offset + 1,
                                 reason: error.reason + " in \"\(excerpt)\"")
        }
        self.source = source
    }

    public func evaluate(auth: JSON?, root: Node, now: Int64) -> Bool {
        evaluate(auth: auth, root: root, now: now, recorder: nil)
    }

    /// `evaluate`, adding to `readSet` what it read from `root` (see `ReadSet`).
    public func evaluate(auth: JSON?, root: Node, now: Int64, recording readSet: inout ReadSet) -> Bool {
        ReadRecorder.recording(into: &readSet) { evaluate(auth: auth, root: root, now: now, recorder: $0) }
    }

    private func evaluate(auth: JSON?, root: Node, now: Int64, recorder: ReadRecorder?) -> Bool {
        let view = TreeView(node: root)
        let context = EvaluationContext(
            auth: RuleSet.authValue(auth), now: Double(now), query: .none, root: view, newRoot: nil,
            path: [], depth: 0, data: view, newData: .empty, bindings: [], recorder: recorder.map(Unmanaged.passUnretained))
        if case .success(true) = context.evaluate(expression) { return true }
        return false
    }
}
