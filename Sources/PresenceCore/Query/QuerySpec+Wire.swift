extension QuerySpec {
    /// Parses the wire query object `q` of a tagged listen, an unlisten or a `g` (§8.3).
    ///
    /// * `i` absent or null means the priority index.
    /// * `sp`/`ep` present (even as JSON null) set a bound; `sn`/`en` (a key, or the sentinels
    ///   `"[MIN_NAME]"`/`"[MAX_NAME]"`; null means none) and `sin`/`ein` (absent means inclusive, as
    ///   8.x clients send no flag) refine it. `sn`/`sin` without `sp` are ignored.
    /// * `l` must be a positive integer. `vf` is `"l"` or `"r"`; when absent the limit anchors to
    ///   the start if a start bound exists, else to the end (the JS client's `isViewFromLeft`).
    /// * Bound values must be primitives; with the key index they must be strings (names are
    ///   ignored there, as the JS client ignores them); with the priority index they may not be
    ///   booleans.
    /// Unknown members are ignored.
    public init(wire: JSON) throws(QueryError) {
        guard case .object = wire else { throw QueryError.notAnObject }
        self.init(index: try Self.wireIndex(wire["i"]))
        start = try Self.wireBound(wire, value: "sp", name: "sn", inclusive: "sin")
        end = try Self.wireBound(wire, value: "ep", name: "en", inclusive: "ein")
        if let l = wire["l"], !l.isNull {
            let count = try Self.positiveInteger(l, name: "l")
            let direction: QueryLimit.Direction
            switch wire["vf"] {
            case nil, .null?: direction = start != nil ? .first : .last
            case .string("l")?: direction = .first
            case .string("r")?: direction = .last
            default: throw QueryError.invalidParameter(name: "vf", reason: "must be \"l\" or \"r\"")
            }
            limit = QueryLimit(count: count, direction: direction)
        }
        try validateBoundValues(names: "sp and ep", rejectNamesOnKeyIndex: false)
    }

    private static func wireIndex(_ json: JSON?) throws(QueryError) -> QueryIndex {
        switch json {
        case nil, .null?: return .priority
        case .string(let name)?: return try index(named: name, parameter: "i")
        default: throw QueryError.invalidParameter(name: "i", reason: "must be a string")
        }
    }

    /// `.key`, `.value`, `.priority` or a child path (`a/b`, validated like any path).
    static func index(named name: String, parameter: String) throws(QueryError) -> QueryIndex {
        switch name {
        case ".key": return .key
        case ".value": return .value
        case ".priority": return .priority
        default:
            let invalid = QueryError.invalidParameter(
                name: parameter, reason: "must name an index: \(ClientInput.quoted(name)) is not a valid child path")
            guard let path = try? Path(name), !path.isRoot else { throw invalid }
            // `/.priority` or `.priority/` is the priority index, which is what its wire name
            // (".priority") says; as a child index it changed meaning on the way back (found by
            // fuzzing: the listen and its unlisten named different queries).
            if path.segments == [".priority"] { return .priority }
            return .child(path)
        }
    }

    private static func wireBound(_ q: JSON, value: String, name: String, inclusive: String) throws(QueryError) -> QueryBound? {
        guard let raw = q[value] else { return nil }
        guard let boundValue = QueryValue(json: raw) else {
            throw QueryError.invalidParameter(name: value, reason: "cannot be an object or an array")
        }
        var bound = QueryBound(value: boundValue)
        switch q[name] {
        case nil, .null?: break
        case .string(let s)?:
            // A name is a key (or a sentinel); a longer one can match nothing.
            guard s.utf8.count <= Path.maxKeyPathBytes else {
                throw QueryError.invalidParameter(name: name, reason: "must be at most \(Path.maxKeyPathBytes) bytes")
            }
            bound.name = s
        default: throw QueryError.invalidParameter(name: name, reason: "must be a string")
        }
        switch q[inclusive] {
        case nil, .null?: break
        case .bool(let b)?: bound.inclusive = b
        default: throw QueryError.invalidParameter(name: inclusive, reason: "must be a boolean")
        }
        return bound
    }

    /// A limit: a whole number from 1 to 2^53 − 1.
    static func positiveInteger(_ json: JSON, name: String) throws(QueryError) -> Int {
        guard let count = ClientInput.integer(json, in: 1...ClientInput.maxSafeInteger) else {
            throw QueryError.invalidParameter(name: name, reason: "must be a positive integer (1 to \(ClientInput.maxSafeInteger))")
        }
        return count
    }

    /// The checks the JS client makes before it sends a query (`validateQueryEndpoints`).
    func validateBoundValues(names: String, rejectNamesOnKeyIndex: Bool) throws(QueryError) {
        for bound in [start, end].compactMap({ $0 }) {
            switch index {
            case .key:
                guard case .string = bound.value else {
                    throw QueryError.invalidParameter(name: names, reason: "must be strings when ordering by key")
                }
                if rejectNamesOnKeyIndex, bound.name != nil {
                    throw QueryError.invalidParameter(name: names, reason: "cannot have a key name when ordering by key")
                }
            case .priority:
                if case .bool = bound.value {
                    throw QueryError.invalidParameter(
                        name: names, reason: "must be valid priorities (null, a number or a string) when ordering by priority")
                }
            case .value, .child:
                break
            }
        }
    }
}
