/// The query a read carries, as the `query` rule variable sees it (spec §3.7).
public struct RuleQuery: Sendable, Equatable {
    public enum OrderBy: Sendable, Equatable {
        case key
        case value
        case priority
        case child(String)
    }

    /// nil means no explicit ordering, which the rules see as `orderByKey == true`.
    public var orderBy: OrderBy?
    /// Range bounds: primitives (string, number, boolean) or nil when absent.
    public var startAt: JSON?
    public var endAt: JSON?
    public var equalTo: JSON?
    public var limitToFirst: Int?
    public var limitToLast: Int?

    public init(orderBy: OrderBy? = nil, startAt: JSON? = nil, endAt: JSON? = nil, equalTo: JSON? = nil,
                limitToFirst: Int? = nil, limitToLast: Int? = nil) {
        self.orderBy = orderBy
        self.startAt = startAt
        self.endAt = endAt
        self.equalTo = equalTo
        self.limitToFirst = limitToFirst
        self.limitToLast = limitToLast
    }

    /// Reads the conformance-vector / REST shape: `{"orderByChild": "owner", "orderByValue": true,
    /// "orderByKey": true, "orderByPriority": true, "startAt": …, "endAt": …, "equalTo": …,
    /// "limitToFirst": n, "limitToLast": n}`. Unknown members are ignored.
    public init(json: JSON) {
        self.init()
        if let child = json["orderByChild"]?.stringValue {
            orderBy = .child(child)
        } else if json["orderByValue"]?.boolValue == true {
            orderBy = .value
        } else if json["orderByPriority"]?.boolValue == true {
            orderBy = .priority
        } else if json["orderByKey"]?.boolValue == true {
            orderBy = .key
        }
        startAt = json["startAt"].flatMap { $0.isNull ? nil : $0 }
        endAt = json["endAt"].flatMap { $0.isNull ? nil : $0 }
        equalTo = json["equalTo"].flatMap { $0.isNull ? nil : $0 }
        // Limits that are not whole numbers within 2^53 are ignored rather than trapping.
        limitToFirst = json["limitToFirst"].flatMap { ClientInput.integer($0, in: 0...ClientInput.maxSafeInteger) }
        limitToLast = json["limitToLast"].flatMap { ClientInput.integer($0, in: 0...ClientInput.maxSafeInteger) }
    }

    /// The value a write rule sees: no query at all.
    public static let none = RuleQuery()
}
