/// Why a command got no reply. The distinction that matters to callers is whether Redis may have
/// run it: a write whose outcome is unknown must be resolved (for the log: by reading it back)
/// before it is reported as failed or done.
public enum RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Never written to Redis: not connected until the command's deadline, the connection was
    /// closed, or the command was refused before sending. Redis did not run it.
    case notSent(String)
    /// Written, but no reply within the command's timeout (a late reply is dropped). Redis may or
    /// may not have run it.
    case timedOut
    /// Written, and the connection ended before the reply. Redis may or may not have run it.
    case connectionLost(String)
    /// Redis answered, but with an error (a script error, a wrong type) or a reply the calling
    /// API does not understand. Redis's answer is final; our scripts make no writes before an error.
    case unexpectedReply(String)

    /// Whether Redis may have run the command.
    public var outcomeUnknown: Bool {
        switch self {
        case .notSent, .unexpectedReply: false
        case .timedOut, .connectionLost: true
        }
    }

    public var description: String {
        switch self {
        case .notSent(let reason): "not sent to Redis: \(reason)"
        case .timedOut: "Redis did not reply in time"
        case .connectionLost(let reason): "connection to Redis lost: \(reason)"
        case .unexpectedReply(let reply): "unexpected reply from Redis: \(reply)"
        }
    }
}
