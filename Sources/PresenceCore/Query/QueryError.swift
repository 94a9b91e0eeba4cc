/// Why a wire `q` object or a set of REST query parameters was refused.
///
/// `description` is a human-readable sentence fit for a REST `{"error": …}` body (status 400) or
/// the `d` of a wire error reply.
public enum QueryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The wire `q` was not a JSON object.
    case notAnObject
    /// A member of the wire `q` object, or a REST parameter, has a value of the wrong form.
    case invalidParameter(name: String, reason: String)
    /// REST: `startAt`, `endAt`, `equalTo`, `limitTo…` without `orderBy`.
    case orderByRequired
    /// Two parameters that set the same thing (`limitToFirst` and `limitToLast`, `startAt` and
    /// `equalTo`, …), or `shallow` with filtering.
    case conflictingParameters(String, String)

    public var description: String {
        switch self {
        case .notAnObject:
            return "query must be a JSON object"
        case let .invalidParameter(name, reason):
            return "\(name) \(reason)"
        case .orderByRequired:
            return "orderBy must be defined when other query parameters are defined"
        case let .conflictingParameters(a, b):
            if a == "shallow" || b == "shallow" {
                return "shallow cannot be combined with orderBy, startAt, startAfter, endAt, endBefore, equalTo or limits"
            }
            return "\(a) and \(b) cannot be used together"
        }
    }
}
