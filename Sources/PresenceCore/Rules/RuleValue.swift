/// A value while a rule runs (spec §3.3).
enum RuleValue {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    /// An object or array from `auth` (maps keep their JSON form).
    case json(JSON)
    /// Boxed to keep `RuleValue` small; snapshot chains avoid the box (see `snapshotValue`).
    case snapshot(SnapshotBox)
    /// What `val()` returns for a node with children: non-null, equal to nothing.
    case nonLeaf
    case regex(RuleRegex)
    /// The `query` variable (its fields are read from the evaluation context).
    case query

    init(_ json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .array, .object: self = .json(json)
        }
    }

    init(_ constant: RuleConstant) {
        switch constant {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .regex(let r): self = .regex(r)
        }
    }

    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .json(let j): return j.objectMembers != nil ? "object" : "array"
        case .snapshot: return "RuleDataSnapshot"
        case .nonLeaf: return "non-leaf value"
        case .regex: return "RegExp"
        case .query: return "query"
        }
    }
}

final class SnapshotBox {
    let snapshot: RuleSnapshot
    init(_ snapshot: RuleSnapshot) { self.snapshot = snapshot }
}

/// A `RuleDataSnapshot`: a location in the pre-write tree (`root`, `data`) or the merged
/// post-write tree (`newData`).
struct RuleSnapshot {
    var view: TreeView
    var isNew: Bool
    /// Location: the first `baseCount` segments of `base`, then `extra` (from `child()` calls).
    var base: [String]
    var baseCount: Int
    var extra: [String]

    var segments: [String] { Array(base.prefix(baseCount)) + extra }
}
