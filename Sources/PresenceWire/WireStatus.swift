import PresenceCore

/// The one place where engine errors become wire statuses (§3.3). Every error `d` is a
/// human-readable string, because Android casts it to `String`.
public enum WireStatus {
    public static func status(for error: EngineError) -> (status: String, message: String) {
        switch error {
        case .permissionDenied: return ("permission_denied", "Permission denied")
        case .invalidData(let message): return ("invalid_data", message)
        case .invalidToken(let message): return ("invalid_token", message)
        case .expiredToken(let message): return ("expired_token", message)
        case .dataStale: return ("datastale", "Transaction hash does not match")
        case .tooBig(let message): return ("too_big", message)
        case .notSupported(let message): return ("not_supported", message)
        case .unavailable(let message): return ("unavailable", message)
        case .rateLimited(let message, _): return ("rate_limited", message)
        }
    }
}
