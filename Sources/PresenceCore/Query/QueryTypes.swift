/// What a query orders children by (§8.2, §8.3 `i`).
public enum QueryIndex: Sendable, Hashable {
    /// `orderByKey()`, wire `".key"`, REST `"$key"`.
    case key
    /// `orderByValue()`, wire `".value"`, REST `"$value"`.
    case value
    /// `orderByPriority()`, wire `".priority"` or no `i` at all, REST `"$priority"`. The default.
    case priority
    /// `orderByChild("a/b")`: the value at that (possibly nested) path inside each child.
    case child(Path)

    /// The wire spelling of `i` (§8.3); `child` paths are `/`-joined without a leading slash.
    public var wireName: String {
        switch self {
        case .key: return ".key"
        case .value: return ".value"
        case .priority: return ".priority"
        case .child(let path): return path.wireString
        }
    }
}

/// A bound's value: queries only accept primitives and null (objects are rejected by the clients).
public enum QueryValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)

    /// Nil for objects and arrays.
    public init?(json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let b): self = .bool(b)
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .array, .object: return nil
        }
    }

    public var json: JSON {
        switch self {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .number(let n): return .number(n)
        case .string(let s): return .string(s)
        }
    }
}

/// One end of a range: `startAt(value, name)` / `startAfter` / `endAt` / `endBefore`
/// (`sp`/`sn`/`sin`, `ep`/`en`/`ein` on the wire).
public struct QueryBound: Sendable, Hashable {
    public var value: QueryValue
    /// The key tie-break. Nil means "none given": the bound then takes the name that makes it
    /// widest when inclusive, narrowest when exclusive (see `effectiveName`). May be one of the
    /// sentinels `QueryOrder.minName` / `QueryOrder.maxName`. Ignored by the key index.
    public var name: String?
    /// True for `startAt`/`endAt`/`equalTo`, false for `startAfter`/`endBefore`.
    public var inclusive: Bool

    public init(value: QueryValue, name: String? = nil, inclusive: Bool = true) {
        self.value = value
        self.name = name
        self.inclusive = inclusive
    }
}

/// `limitToFirst(n)` / `limitToLast(n)` (`l` and `vf`).
public struct QueryLimit: Sendable, Hashable {
    public enum Direction: Sendable, Hashable {
        /// `vf: "l"`: keep the first `count` children in index order.
        case first
        /// `vf: "r"`: keep the last `count` children in index order.
        case last
    }

    public var count: Int
    public var direction: Direction

    public init(count: Int, direction: Direction) {
        self.count = count
        self.direction = direction
    }

    public static func first(_ count: Int) -> QueryLimit { QueryLimit(count: count, direction: .first) }
    public static func last(_ count: Int) -> QueryLimit { QueryLimit(count: count, direction: .last) }
}
