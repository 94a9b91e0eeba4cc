import PresenceCore
import PresenceWire

/// The client's side of the one error table (`PresenceWire.WireStatus`): a reply's status string
/// decodes with `WireStatus(rawValue:)` into the engine's typed error and the table's retry
/// advice, so no status string is spelled a second time on this side of the wire.
extension RequestFailure {
    /// A refusal with the status the server sends for `error`, and its message unless `message` is given.
    public init(_ error: EngineError, message: String? = nil) {
        let wire = WireStatus.failure(for: error)
        self.init(status: wire.status.rawValue, message: message ?? wire.message)
    }

    /// The status as the server's table names it; nil for statuses this server does not send (a
    /// newer server's, or an `ac` reason such as `revoked`).
    public var wireStatus: WireStatus? { WireStatus(rawValue: status) }

    /// The typed error the status stands for (nil for an unknown status).
    public var error: EngineError? { wireStatus?.error(message: message) }

    /// What the table advises a client to do (nil for an unknown status).
    public var retry: WireStatus.Retry? { wireStatus?.retry }

    /// The credential was refused or has expired: another one is needed.
    public var isCredentialProblem: Bool { retry == .renewTokenThenRetry }

    /// A limited operation refused for now (`docs/limits.md`); the message says when to try again.
    public var isRateLimited: Bool { retry == .retryAfterWaiting }
}
