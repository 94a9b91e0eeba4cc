/// A parsed JSON document, as it arrives on the wire or in a file.
///
/// Object member order is kept (`[(key, value)]`) because rules files and error messages
/// read better in source order; lookups on small objects are linear and cheap.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            // Same members in the same order (the usual case), else the same value for each key
            // with the last of a repeated key winning, as `subscript` reads it. (Comparing `a`'s
            // every member with `b`'s last one made an object with a repeated key unequal to
            // itself; found by fuzzing.)
            if a.count == b.count, zip(a, b).allSatisfy({ $0.0 == $1.0 && $0.1 == $1.1 }) { return true }
            return Dictionary(a, uniquingKeysWith: { _, last in last }) == Dictionary(b, uniquingKeysWith: { _, last in last })
        default: return false
        }
    }

    /// The member named `key` of an object (the last one if repeated), or nil.
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var objectMembers: [(String, JSON)]? {
        if case .object(let m) = self { return m }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The location (`/`-joined member names and array indexes) of the first non-finite number,
    /// or nil when every number is finite. Only documents from `parseReportingOverflow` can
    /// hold one.
    public func firstNonFiniteNumber() -> String? {
        switch self {
        case .number(let n): return n.isFinite ? nil : ""
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let inner = element.firstNonFiniteNumber() { return inner.isEmpty ? "\(index)" : "\(index)/\(inner)" }
            }
            return nil
        case .object(let members):
            for (key, member) in members {
                if let inner = member.firstNonFiniteNumber() { return inner.isEmpty ? key : "\(key)/\(inner)" }
            }
            return nil
        case .null, .bool, .string: return nil
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(elements) }
}
