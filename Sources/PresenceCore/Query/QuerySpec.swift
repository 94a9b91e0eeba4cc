/// A Realtime Database query: an index, an optional range and an optional limit (§8.3, §9.1).
///
/// Build one from the wire `q` object (`QuerySpec(wire:)`) or from REST parameters
/// (`QuerySpec(rest:)`), then `apply(to:)` it to the node at the query's location.
public struct QuerySpec: Sendable, Hashable {
    public var index: QueryIndex
    public var start: QueryBound?
    public var end: QueryBound?
    public var limit: QueryLimit?

    public init(index: QueryIndex = .priority, start: QueryBound? = nil, end: QueryBound? = nil, limit: QueryLimit? = nil) {
        self.index = index
        self.start = start
        self.end = end
        self.limit = limit
    }

    /// The plain listen: priority order, everything.
    public static let `default` = QuerySpec()

    /// True when the query has a range or a limit, i.e. it does not load all data at its location.
    /// Only such queries are sent as tagged listens (§3.2 point 6) and only they filter.
    public var isFiltered: Bool { start != nil || end != nil || limit != nil }

    /// True for the query the JS client calls "default": priority index, no range, no limit.
    public var isDefault: Bool { !isFiltered && index == .priority }

    /// The query object as the current JS SDK puts it on the wire (`queryParamsGetQueryObject`):
    /// `sp`/`sn`/`sin`, `ep`/`en`/`ein`, `l`/`vf`, and `i` unless the index is priority.
    /// Members are in sorted key order. `{}` for the default query.
    public var wireObject: JSON {
        var members: [(String, JSON)] = []
        if let end {
            members.append(("ein", .bool(end.inclusive)))
            if let name = end.name { members.append(("en", .string(name))) }
            members.append(("ep", end.value.json))
        }
        if index != .priority { members.append(("i", .string(index.wireName))) }
        if let limit { members.append(("l", .number(Double(limit.count)))) }
        if let start {
            members.append(("sin", .bool(start.inclusive)))
            if let name = start.name { members.append(("sn", .string(name))) }
            members.append(("sp", start.value.json))
        }
        if let limit { members.append(("vf", .string(limit.direction == .first ? "l" : "r"))) }
        return .object(members)
    }

    /// The JS client's query identifier: `"default"` for the default query, otherwise the JSON of
    /// `wireObject` with sorted keys (`ObjectToUniqueKey`). Two specs are the same query exactly
    /// when their identities are equal.
    public var identity: String {
        if isDefault { return "default" }
        return JSONWriter.string(wireObject)
    }
}

extension QuerySpec: CustomStringConvertible {
    public var description: String { identity }
}
