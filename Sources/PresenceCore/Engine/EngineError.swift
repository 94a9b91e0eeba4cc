/// Why the engine refused a request. `PresenceWire.WireStatus` maps each case to a wire status.
///
/// Retry or give up: `permissionDenied`, `invalidData`, `invalidToken` and `notSupported` mean
/// "do not retry the same request"; `dataStale` means "re-read and retry" (transactions);
/// `unavailable` means "retry later".
public enum EngineError: Error, Equatable, Sendable {
    case permissionDenied
    case invalidData(String)
    case invalidToken(String)
    case expiredToken(String)
    case dataStale
    case tooBig(String)
    case notSupported(String)
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
