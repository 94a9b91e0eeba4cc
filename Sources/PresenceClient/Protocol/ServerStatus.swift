import PresenceCore
import PresenceWire

/// The one place where the client turns a reply's status into a typed error: the engine's own
/// `EngineError`, found through the server's table (`WireStatus`) read backwards, so no status
/// string is spelled a second time on this side of the wire.
///
/// When `WireStatus` becomes a typed table with a lookup by status, ``error(status:message:)`` is
/// that lookup and the rest of this file goes.
enum ServerStatus {
    /// The engine error a refusal stands for; nil for `ok` and for statuses this server does not
    /// send (a newer server's, or an `ac` reason such as `revoked`).
    static func error(status: String, message: String) -> EngineError? {
        byStatus[status].map { rebuild($0, message: message) }
    }

    /// The status and message the server sends for `error`.
    static func wire(_ error: EngineError) -> (status: String, message: String) {
        WireStatus.status(for: error)
    }

    /// One error of each kind, keyed by the status the server's table gives it.
    private static let byStatus: [String: EngineError] = {
        let kinds: [EngineError] = [
            .permissionDenied, .invalidData(""), .invalidToken(""), .expiredToken(""), .dataStale, .tooBig(""),
            .notSupported(""), .unavailable(""), .rateLimited("", retryAfterMilliseconds: nil),
        ]
        var table: [String: EngineError] = [:]
        for kind in kinds { table[WireStatus.status(for: kind).status] = kind }
        return table
    }()

    /// `kind` carrying the server's message. Exhaustive, so a new engine error stops the build here
    /// (add it to `byStatus` beside it).
    private static func rebuild(_ kind: EngineError, message: String) -> EngineError {
        switch kind {
        case .permissionDenied: .permissionDenied
        case .invalidData: .invalidData(message)
        case .invalidToken: .invalidToken(message)
        case .expiredToken: .expiredToken(message)
        case .dataStale: .dataStale
        case .tooBig: .tooBig(message)
        case .notSupported: .notSupported(message)
        case .unavailable: .unavailable(message)
        // The wait is only in the message ("try again in 1:45"); REST carries it as Retry-After.
        case .rateLimited: .rateLimited(message, retryAfterMilliseconds: nil)
        }
    }
}

extension RequestFailure {
    /// A refusal with the status the server sends for `error`, and its message unless `message` is given.
    public init(_ error: EngineError, message: String? = nil) {
        let wire = ServerStatus.wire(error)
        self.init(status: wire.status, message: message ?? wire.message)
    }

    /// The typed error the status stands for (nil for an unknown status).
    public var error: EngineError? { ServerStatus.error(status: status, message: message) }

    /// The credential was refused or has expired: another one is needed.
    public var isCredentialProblem: Bool {
        switch error {
        case .invalidToken, .expiredToken: true
        default: false
        }
    }

    /// A limited operation refused for now (`docs/limits.md`); the message says when to try again.
    public var isRateLimited: Bool {
        if case .rateLimited = error { return true }
        return false
    }
}
