extension QuerySpec {
    /// The REST parameters this parser reads; any other parameter (`ns`, `auth`, `print`, …) is
    /// ignored. `shallow` is read only to refuse it beside filtering.
    public static let restParameters: Set<String> = [
        "orderBy", "startAt", "startAfter", "endAt", "endBefore", "equalTo", "limitToFirst", "limitToLast",
    ]

    /// Parses REST query parameters (§9.1). Values are JSON text, already percent-decoded:
    /// `orderBy="$key"`, `startAt=3.5`, `equalTo="x"`, `limitToFirst=2`.
    ///
    /// * `orderBy` is `"$key"`, `"$value"`, `"$priority"` or a child path (`"ratings/pos"`).
    ///   Any other parameter listed in `restParameters` without `orderBy` is an error.
    /// * `startAfter`/`endBefore` are exclusive bounds; `equalTo` sets both ends, inclusive.
    ///   A bound may carry a key name as the JS SDK's REST client writes it: `startAt=5,"name"`.
    /// * At most one start (`startAt`, `startAfter`, `equalTo`), one end (`endAt`, `endBefore`,
    ///   `equalTo`) and one limit; limits are positive integers.
    /// * `shallow=true` with any of these parameters is an error.
    /// With none of them, the result is `QuerySpec.default`.
    public init(rest parameters: [String: String]) throws(QueryError) {
        self.init()
        let given = QuerySpec.restParameters.filter { parameters[$0] != nil }
        guard !given.isEmpty else { return }
        if parameters["shallow"] == "true", let first = given.sorted().first {
            throw QueryError.conflictingParameters("shallow", first)
        }
        guard let orderBy = parameters["orderBy"] else { throw QueryError.orderByRequired }
        index = try Self.restIndex(orderBy)

        try Self.exclusive(["startAt", "startAfter", "equalTo"], in: parameters)
        try Self.exclusive(["endAt", "endBefore", "equalTo"], in: parameters)
        try Self.exclusive(["limitToFirst", "limitToLast"], in: parameters)

        if let text = parameters["startAt"] { start = try Self.restBound(text, parameter: "startAt", inclusive: true) }
        if let text = parameters["startAfter"] { start = try Self.restBound(text, parameter: "startAfter", inclusive: false) }
        if let text = parameters["endAt"] { end = try Self.restBound(text, parameter: "endAt", inclusive: true) }
        if let text = parameters["endBefore"] { end = try Self.restBound(text, parameter: "endBefore", inclusive: false) }
        if let text = parameters["equalTo"] {
            start = try Self.restBound(text, parameter: "equalTo", inclusive: true)
            end = start
        }
        for (name, direction) in [("limitToFirst", QueryLimit.Direction.first), ("limitToLast", .last)] {
            guard let text = parameters[name] else { continue }
            let json = (try? JSONParser.parse(text)) ?? .null
            limit = QueryLimit(count: try Self.positiveInteger(json, name: name), direction: direction)
        }
        let names = ["startAt", "startAfter", "endAt", "endBefore", "equalTo"].filter { parameters[$0] != nil }
        try validateBoundValues(names: names.joined(separator: " and "), rejectNamesOnKeyIndex: true)
    }

    private static func restIndex(_ text: String) throws(QueryError) -> QueryIndex {
        guard case .string(let name)? = try? JSONParser.parse(text) else {
            throw QueryError.invalidParameter(name: "orderBy", reason: "must be a valid JSON encoded path")
        }
        switch name {
        case "$key": return .key
        case "$value": return .value
        case "$priority": return .priority
        default: return try index(named: name, parameter: "orderBy")
        }
    }

    private static func exclusive(_ names: [String], in parameters: [String: String]) throws(QueryError) {
        let present = names.filter { parameters[$0] != nil }
        if present.count > 1 { throw QueryError.conflictingParameters(present[0], present[1]) }
    }

    /// `value` or `value,"name"` (JSON text).
    private static func restBound(_ text: String, parameter: String, inclusive: Bool) throws(QueryError) -> QueryBound {
        let invalid = QueryError.invalidParameter(
            name: parameter, reason: "must be a JSON string, number, boolean or null, optionally followed by ,\"key\"")
        if let json = try? JSONParser.parse(text) {
            guard let value = QueryValue(json: json) else { throw invalid }
            return QueryBound(value: value, inclusive: inclusive)
        }
        guard case .array(let pair)? = try? JSONParser.parse("[" + text + "]"), pair.count == 2,
            let value = QueryValue(json: pair[0]), case .string(let name) = pair[1]
        else { throw invalid }
        guard name.utf8.count <= Path.maxKeyPathBytes else {
            throw QueryError.invalidParameter(name: parameter, reason: "key name must be at most \(Path.maxKeyPathBytes) bytes")
        }
        return QueryBound(value: value, name: name, inclusive: inclusive)
    }
}
