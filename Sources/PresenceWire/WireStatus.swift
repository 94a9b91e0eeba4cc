import PresenceCore

/// The one error table: every status a refused request can carry on the wire (§3.3), and what it
/// means over WebSocket, REST, a Server-Sent Events stream and for a client deciding to retry.
///
/// | status | engine error | REST | on a stream | the client should |
/// | --- | --- | --- | --- | --- |
/// | `permission_denied` | `permissionDenied` | 401 | refused (401) at open; `cancel` when revoked | give up |
/// | `invalid_data` | `invalidData` | 400 | refused (400) | give up: fix the request |
/// | `invalid_token` | `invalidToken` | 401 | refused (401); `auth_revoked` when revoked | get a new token, retry |
/// | `expired_token` | `expiredToken` | 401 | refused (401); `auth_revoked` when it expires | get a new token, retry |
/// | `datastale` | `dataStale` | 412 | – | read again, retry (transactions) |
/// | `too_big` | `tooBig` | 413 | refused (413) | give up: read less (a narrower query) |
/// | `not_supported` | `notSupported` | 501 | refused (501) | give up |
/// | `unavailable` | `unavailable` | 503 | refused (503) | retry later |
/// | `rate_limited` | `rateLimited` | 429 + `Retry-After` | refused (429 + `Retry-After`) | wait the stated time |
///
/// Every error `d` is a human-readable string (Android casts it to `String`). Clients decode a
/// status with `WireStatus(rawValue:)`; `"ok"` and statuses this server never sends give nil.
public enum WireStatus: String, Sendable, CaseIterable {
    case permissionDenied = "permission_denied"
    case invalidData = "invalid_data"
    case invalidToken = "invalid_token"
    case expiredToken = "expired_token"
    case dataStale = "datastale"
    case tooBig = "too_big"
    case notSupported = "not_supported"
    case unavailable = "unavailable"
    case rateLimited = "rate_limited"

    /// What a client does with a refusal.
    public enum Retry: Sendable, Equatable {
        /// The same request will be refused again.
        case giveUp
        /// Get a new credential (`auth` again), then retry.
        case renewTokenThenRetry
        /// Read the current value again, then retry (a transaction lost a race).
        case rereadThenRetry
        /// A passing condition on the server: retry later, with backoff.
        case retryLater
        /// Wait the time the message (or REST's `Retry-After`) states, then retry.
        case retryAfterWaiting
    }

    public init(_ error: EngineError) {
        switch error {
        case .permissionDenied: self = .permissionDenied
        case .invalidData: self = .invalidData
        case .invalidToken: self = .invalidToken
        case .expiredToken: self = .expiredToken
        case .dataStale: self = .dataStale
        case .tooBig: self = .tooBig
        case .notSupported: self = .notSupported
        case .unavailable: self = .unavailable
        case .rateLimited: self = .rateLimited
        }
    }

    /// The status and its human-readable message for an engine error.
    public static func failure(for error: EngineError) -> (status: WireStatus, message: String) {
        switch error {
        case .permissionDenied: return (.permissionDenied, "Permission denied")
        case .dataStale: return (.dataStale, "Transaction hash does not match")
        case .invalidData(let message), .invalidToken(let message), .expiredToken(let message), .tooBig(let message),
             .notSupported(let message), .unavailable(let message), .rateLimited(let message, _):
            return (WireStatus(error), message)
        }
    }

    /// The engine error a client reads from a refusal with this status and `message` (the reverse
    /// of `failure(for:)`). Exhaustive both ways, so a new engine error or status stops the build
    /// here. A rate-limited refusal's wait is only in its message ("try again in 1:45"); REST
    /// carries it as `Retry-After`.
    public func error(message: String) -> EngineError {
        switch self {
        case .permissionDenied: return .permissionDenied
        case .invalidData: return .invalidData(message)
        case .invalidToken: return .invalidToken(message)
        case .expiredToken: return .expiredToken(message)
        case .dataStale: return .dataStale
        case .tooBig: return .tooBig(message)
        case .notSupported: return .notSupported(message)
        case .unavailable: return .unavailable(message)
        case .rateLimited: return .rateLimited(message, retryAfterMilliseconds: nil)
        }
    }

    /// The HTTP status of a REST response (and of a stream refused at open) carrying this error.
    /// The Python Admin SDK expects 401 for "Permission denied" (§9.1).
    public var httpStatus: Int {
        switch self {
        case .permissionDenied, .invalidToken, .expiredToken: return 401
        case .invalidData: return 400
        case .dataStale: return 412
        case .tooBig: return 413
        case .rateLimited: return 429
        case .notSupported: return 501
        case .unavailable: return 503
        }
    }

    /// Whether a REST response carries `Retry-After` (when the engine knows the wait).
    public var hasRetryAfter: Bool { self == .rateLimited }

    /// The Server-Sent Event that ends an open stream (§9.4).
    public enum StreamEvent: String, Sendable {
        /// The rules no longer allow the read.
        case cancel
        /// The credential was revoked or expired.
        case authRevoked = "auth_revoked"
    }

    /// The event that ends an open stream when this refusal happens after it opened (a listen the
    /// rules stop allowing, a credential revoked or expired); nil when it can only refuse the
    /// stream at open, with `httpStatus`.
    public var streamEvent: StreamEvent? {
        switch self {
        case .permissionDenied: return .cancel
        case .invalidToken, .expiredToken: return .authRevoked
        default: return nil
        }
    }

    public var retry: Retry {
        switch self {
        case .permissionDenied, .invalidData, .tooBig, .notSupported: return .giveUp
        case .invalidToken, .expiredToken: return .renewTokenThenRetry
        case .dataStale: return .rereadThenRetry
        case .unavailable: return .retryLater
        case .rateLimited: return .retryAfterWaiting
        }
    }

    /// `Retry-After` in whole seconds, rounded up, for an error that knows how long to wait.
    public static func retryAfterSeconds(for error: EngineError) -> Int64? {
        guard case .rateLimited(_, let milliseconds?) = error else { return nil }
        let whole = max(0, milliseconds)
        return whole / 1000 + (whole % 1000 > 0 ? 1 : 0)
    }
}

extension HTTPResponse {
    /// The REST response for an engine error: its status, its message, `Retry-After` where known.
    public static func refusal(for error: EngineError) -> HTTPResponse {
        let (status, message) = WireStatus.failure(for: error)
        var response = HTTPResponse.error(status.httpStatus, message)
        if status.hasRetryAfter, let seconds = WireStatus.retryAfterSeconds(for: error) {
            response.headers.append(("Retry-After", String(seconds)))
        }
        return response
    }
}
