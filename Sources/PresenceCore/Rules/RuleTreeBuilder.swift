/// Builds the compiled rule tree from a parsed rules document, enforcing spec §1.2–§1.4.
struct RuleTreeBuilder {
    static let maxDocumentBytes = 256 * 1024
    static let maxExpressionBytes = 16 * 1024
    static let maxDepth = 64

    let source: String

    func fail(_ path: String, _ reason: String, position: Int? = nil) -> RulesLoadError {
        RulesLoadError(source: source, rulePath: path, position: position, reason: reason)
    }

    func build(document: JSON) throws(RulesLoadError) -> RuleNode {
        guard let members = document.objectMembers else {
            throw fail("", "the rules document must be a JSON object")
        }
        guard members.contains(where: { $0.0 == "rules" }) else {
            throw fail("", "the rules document must have a top-level \"rules\" key")
        }
        if let other = members.first(where: { $0.0 != "rules" }) {
            throw fail("", "unexpected top-level key \(ClientInput.quoted(other.0)): only \"rules\" is allowed")
        }
        return try node(document["rules"] ?? .null, path: "/rules", wildcards: [], depth: 0)
    }

    /// Members with duplicates resolved (the last one wins), in first-appearance order.
    private func uniqueMembers(_ members: [(String, JSON)]) -> [(String, JSON)] {
        var seen: [String: Int] = [:]
        var result: [(String, JSON)] = []
        for (key, value) in members {
            if let index = seen[key] {
                result[index].1 = value
            } else {
                seen[key] = result.count
                result.append((key, value))
            }
        }
        return result
    }

    private func node(_ json: JSON, path: String, wildcards: [String], depth: Int) throws(RulesLoadError) -> RuleNode {
        guard let rawMembers = json.objectMembers else {
            throw fail(path, "a rule node must be an object, not \(kind(json))")
        }
        guard depth <= Self.maxDepth else { throw fail(path, "rules nested deeper than \(Self.maxDepth) levels") }
        var read: CompiledRule?
        var write: CompiledRule?
        var validate: CompiledRule?
        var indexOn: [String] = []
        var children: [String: RuleNode] = [:]
        var wildcardName: String?
        var wildcard: RuleNode?
        for (key, value) in uniqueMembers(rawMembers) {
            let childPath = path + "/" + key
            switch key {
            case ".read": read = try rule(value, path: childPath, wildcards: wildcards, allowsNewData: false)
            case ".write": write = try rule(value, path: childPath, wildcards: wildcards, allowsNewData: true)
            case ".validate": validate = try rule(value, path: childPath, wildcards: wildcards, allowsNewData: true)
            case ".indexOn":
                switch value {
                case .string(let s): indexOn = [s]
                case .array(let items):
                    indexOn = []
                    for item in items {
                        guard case .string(let s) = item else {
                            throw fail(childPath, ".indexOn must be a string or an array of strings, found \(kind(item)) in the array")
                        }
                        indexOn.append(s)
                    }
                default: throw fail(childPath, ".indexOn must be a string or an array of strings, not \(kind(value))")
                }
            default:
                if key.hasPrefix(".") { throw fail(childPath, "unknown rule type \(ClientInput.quoted(key))") }
                if key.hasPrefix("$") {
                    if let existing = wildcardName {
                        throw fail(childPath, "only one wildcard per level is allowed (already have \(ClientInput.quoted(existing)))")
                    }
                    if wildcards.contains(key) {
                        throw fail(childPath, "wildcard \(ClientInput.quoted(key)) is already used by an ancestor on this path")
                    }
                    wildcardName = key
                    wildcard = try node(value, path: childPath, wildcards: wildcards + [key], depth: depth + 1)
                } else {
                    children[key] = try node(value, path: childPath, wildcards: wildcards, depth: depth + 1)
                }
            }
        }
        return RuleNode(read: read, write: write, validate: validate, indexOn: indexOn, children: children,
                        wildcardName: wildcardName, wildcard: wildcard, rulePath: path)
    }

    private func rule(_ value: JSON, path: String, wildcards: [String], allowsNewData: Bool) throws(RulesLoadError) -> CompiledRule {
        switch value {
        case .bool(let b): return CompiledRule(body: .constant(b), rulePath: path)
        case .string(let text):
            guard text.utf8.count <= Self.maxExpressionBytes else {
                throw fail(path, "expression longer than \(Self.maxExpressionBytes) bytes")
            }
            do {
                let expression = try ExpressionCompiler.compile(text, wildcards: wildcards, allowsNewData: allowsNewData)
                if case .constant(.bool(let b)) = expression { return CompiledRule(body: .constant(b), rulePath: path) }
                return CompiledRule(body: .expression(expression), rulePath: path)
            } catch {
                let excerpt = text.count > 120 ? String(text.prefix(117)) + "..." : text
                throw fail(path, error.reason + " in \"\(excerpt)\"", position: error.offset + 1)
            }
        default:
            throw fail(path, "a rule must be a boolean or an expression string, not \(kind(value))")
        }
    }

    private func kind(_ json: JSON) -> String {
        switch json {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}
