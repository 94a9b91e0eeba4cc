/// Moving a database in and out as JSON, for any engine.
///
/// A namespace travels in Firebase's export format (`.priority` / `.value` members, as
/// `Node.json(exportFormat: true)` writes it). A whole database is
/// `{"format": "presence-database", "version": 1, "namespaces": {ns: tree}, "rules": {ns: "document"},
/// "limitUsage": [{"ns", "limit", "uid", "count", "cooldownStartedAt"}]}` (`limitUsage` is optional
/// on import); sessions are not exported (they belong to the running server).
public enum StorageExport {
    public static let format = "presence-database"
    public static let version = 1

    public enum ImportError: Error, Equatable, Sendable, CustomStringConvertible {
        case notADatabase(String)
        case invalidData(namespace: String, DataError)

        public var description: String {
            switch self {
            case .notADatabase(let reason): return "not a presence database export: \(reason)"
            case let .invalidData(namespace, error): return "namespace \"\(namespace)\": \(error)"
            }
        }
    }

    // MARK: One namespace

    /// The namespace's tree in export format (`null` when empty).
    public static func exportNamespace(_ namespace: String, from engine: any StorageEngine) throws -> JSON {
        try engine.loadTree(namespace: namespace).json(exportFormat: true)
    }

    /// A batch that replaces the namespace's tree with `json` (export format; null empties it).
    public static func importBatch(namespace: String, json: JSON) throws(ImportError) -> StorageBatch {
        let tree: Node
        do {
            tree = try Node(json: json)
        } catch {
            throw .invalidData(namespace: namespace, error)
        }
        return StorageBatch(mutations: [.write(namespace: namespace, path: .root, value: tree)])
    }

    /// Replaces the namespace's tree with `json` and commits it.
    public static func importNamespace(_ namespace: String, json: JSON, into engine: any StorageEngine) throws {
        try engine.commit(importBatch(namespace: namespace, json: json))
    }

    // MARK: A whole database

    public static func exportDatabase(_ state: StoredState) -> JSON {
        let names = state.namespaces.keys.sorted()
        let ruleNames = state.rules.keys.sorted()
        return .object([
            ("format", .string(format)),
            ("version", .number(Double(version))),
            ("namespaces", .object(names.map { ($0, state.namespaces[$0]!.json(exportFormat: true)) })),
            ("rules", .object(ruleNames.map { ($0, .string(state.rules[$0]!)) })),
            ("limitUsage", .array(state.limitUsage.sorted { $0.key < $1.key }.map { key, usage in
                .object([
                    ("ns", .string(key.namespace)), ("limit", .string(key.limit)), ("uid", .string(key.uid)),
                    ("count", .number(Double(usage.count))),
                    ("cooldownStartedAt", usage.cooldownStartedAt.map { .number(Double($0)) } ?? .null),
                ])
            })),
        ])
    }

    public static func exportDatabase(from engine: any StorageEngine) throws -> JSON {
        exportDatabase(try engine.load())
    }

    /// A batch that replaces each exported namespace's tree and rules. Namespaces that the export
    /// does not name are left as they are.
    public static func importBatch(database json: JSON) throws(ImportError) -> StorageBatch {
        guard json["format"]?.stringValue == format else { throw .notADatabase("format is not \"\(format)\"") }
        guard json["version"]?.numberValue == Double(version) else { throw .notADatabase("unsupported version") }
        var batch = StorageBatch()
        if let namespaces = json["namespaces"] {
            guard let members = namespaces.objectMembers else { throw .notADatabase("namespaces must be an object") }
            for (name, tree) in members {
                batch.mutations += try importBatch(namespace: name, json: tree).mutations
            }
        }
        if let rules = json["rules"] {
            guard let members = rules.objectMembers else { throw .notADatabase("rules must be an object") }
            for (name, document) in members {
                guard let text = document.stringValue else { throw .notADatabase("rules of \"\(name)\" must be a string") }
                batch.setRules(text, namespace: name)
            }
        }
        if let usage = json["limitUsage"] {
            guard case .array(let entries) = usage else { throw .notADatabase("limitUsage must be an array") }
            for entry in entries {
                guard let ns = entry["ns"]?.stringValue, let limit = entry["limit"]?.stringValue, let uid = entry["uid"]?.stringValue,
                      let count = entry["count"]?.numberValue, count >= 0, count == count.rounded(), count < 1e15 else {
                    throw .notADatabase("each limitUsage entry needs ns, limit, uid and a whole count")
                }
                var started: Int64?
                if let time = entry["cooldownStartedAt"], !time.isNull {
                    // A whole number of milliseconds a double holds exactly: anything else is refused
                    // rather than converted (Int64(1e300) would trap).
                    guard let value = StorageCoding.int64(time) else {
                        throw .notADatabase("cooldownStartedAt of \(ns)/\(limit)/\(uid) must be a whole number of milliseconds")
                    }
                    started = value
                }
                batch.mutations.append(.setLimitUsage(LimitUsageKey(namespace: ns, limit: limit, uid: uid),
                                                      LimitUsage(count: Int(count), cooldownStartedAt: started)))
            }
        }
        return batch
    }

    public static func importDatabase(_ json: JSON, into engine: any StorageEngine) throws {
        try engine.commit(importBatch(database: json))
    }
}
