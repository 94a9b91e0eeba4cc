/// Why a rules document was rejected. The whole document is refused; the previous ruleset stays.
public struct RulesLoadError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The file name, or "REST PUT", the document came from.
    public var source: String
    /// Where in the document: `/rules/users/$uid/.write` for an expression, `/rules/users` for a
    /// rule node, or `""` for the document as a whole (syntax errors).
    public var rulePath: String
    /// 1-based character offset inside the expression (or inside the document for syntax errors).
    public var position: Int?
    public var reason: String

    public init(source: String, rulePath: String, position: Int? = nil, reason: String) {
        self.source = source
        self.rulePath = rulePath
        self.position = position
        self.reason = reason
    }

    public var description: String {
        var text = source
        // The path is made of the document's keys; a hostile document's could be kilobytes long.
        if !rulePath.isEmpty { text += ": " + (rulePath.utf8.count > 200 ? ClientInput.quoted(rulePath, limit: 200) : rulePath) }
        if let position { text += ": at position \(position)" }
        return text + ": " + reason
    }
}
