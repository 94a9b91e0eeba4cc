import Foundation
import Testing
import PresenceCore

/// One line of a `.jsonl` fixture file.
struct RulesVector: Sendable, CustomTestStringConvertible {
    var name: String
    var json: JSON
    var testDescription: String { name }
}

enum RulesFixtures {
    static func url(_ name: String) -> URL? {
        Bundle.module.url(forResource: name, withExtension: "jsonl", subdirectory: "Fixtures")
            ?? Bundle.module.url(forResource: "Fixtures/" + name, withExtension: "jsonl")
            ?? Bundle.module.url(forResource: name, withExtension: "jsonl")
    }

    static func load(_ name: String) -> [RulesVector] {
        guard let url = url(name), let text = try? String(contentsOf: url, encoding: .utf8) else {
            return [RulesVector(name: "MISSING FIXTURE \(name).jsonl", json: .null)]
        }
        var vectors: [RulesVector] = []
        for (number, line) in text.split(separator: "\n").enumerated() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            do {
                let json = try JSONParser.parse(String(line))
                vectors.append(RulesVector(name: "#\(number + 1) " + (json["name"]?.stringValue ?? "?"), json: json))
            } catch {
                vectors.append(RulesVector(name: "UNPARSABLE line \(number + 1): \(error)", json: .null))
            }
        }
        return vectors
    }

    static let runtime = load("rules-vectors")
    static let parse = load("rules-parse-vectors")
}

/// Test helpers: run an operation the way the server will (server values resolved first).
enum RulesHarness {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Replaces `{".sv": "timestamp"}` by `now` and `{".sv": {"increment": n}}` by existing + n.
    static func resolveServerValues(_ json: JSON, now: Int64, existing: Node) -> JSON {
        switch json {
        case .object(let members):
            if let sv = json[".sv"] {
                if sv.stringValue == "timestamp" { return .number(Double(now)) }
                if let delta = sv["increment"]?.numberValue {
                    if case .number(let base)? = existing.leafValue { return .number(base + delta) }
                    return .number(delta)
                }
                return json
            }
            return .object(members.map { key, value in
                (key, resolveServerValues(value, now: now, existing: key.hasPrefix(".") ? .null : existing.child(key)))
            })
        case .array(let items):
            return .array(items.enumerated().map { resolveServerValues($1, now: now, existing: existing.child(String($0))) })
        default: return json
        }
    }

    static func path(_ base: String, _ key: String? = nil) throws -> Path {
        guard let key else { return try Path(base) }
        return try Path(base + "/" + key)
    }

    static func writes(op: String, path: String, data: JSON, root: Node, now: Int64) throws -> [(Path, Node)] {
        if op == "set" {
            let target = try Path(path)
            let value = resolveServerValues(data, now: now, existing: root.node(at: target))
            return [(target, try Node(json: value, at: target))]
        }
        guard let members = data.objectMembers else { throw Failure(description: "update data must be an object") }
        return try members.map { key, value in
            let target = try Self.path(path, key)
            let resolved = resolveServerValues(value, now: now, existing: root.node(at: target))
            return (target, try Node(json: resolved, at: target))
        }
    }

    /// Runs a runtime vector; returns the decision.
    static func run(_ v: JSON) throws -> RuleDecision {
        guard let rulesJSON = v["rules"] else { throw Failure(description: "no rules") }
        let rules = try RuleSet.load(text: JSONWriter.string(rulesJSON), source: "vector")
        let root = try Node(json: v["root"] ?? .null)
        let auth = v["auth"].flatMap { $0.isNull ? nil : $0 }
        let now = Int64(v["now"]?.numberValue ?? 0)
        let op = v["op"]?.stringValue ?? ""
        let path = v["path"]?.stringValue ?? "/"
        switch op {
        case "read":
            let query = v["query"].flatMap { $0.isNull ? nil : RuleQuery(json: $0) }
            return rules.canRead(try Path(path), root: root, auth: auth, now: now, query: query)
        case "set", "update":
            let writes = try writes(op: op, path: path, data: v["data"] ?? .null, root: root, now: now)
            return rules.canWrite(writes, root: root, auth: auth, now: now)
        default:
            throw Failure(description: "unknown op \(op)")
        }
    }
}
