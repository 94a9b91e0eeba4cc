/// Why the engine refused a request. `PresenceWire.WireStatus` is the one table that maps each
/// case to its wire status, its REST status (with `Retry-After`), what it does to a stream, and
/// whether a client should retry.
public enum EngineError: Error, Equatable, Sendable {
    case permissionDenied
    case invalidData(String)
    case invalidToken(String)
    case expiredToken(String)
    /// A transaction's (or `if-match`'s) expected hash does not match the current value.
    case dataStale
    /// A read too large to answer at once (REST 413); the message says how to read less.
    case tooBig(String)
    /// A request this configuration cannot serve (transactions without a data hash function).
    case notSupported(String)
    /// Temporarily impossible (the connection is gone); retry later.
    case unavailable(String)
    /// A limited operation refused (limits file); the message states when to try again.
    case rateLimited(String, retryAfterMilliseconds: Int64?)

    public init(_ error: DataError) { self = .invalidData(error.description) }

    public init(_ error: AuthError) {
        switch error {
        case .invalidToken(let reason): self = .invalidToken(reason)
        case .expiredToken(let reason): self = .expiredToken(reason)
        }
    }
}
