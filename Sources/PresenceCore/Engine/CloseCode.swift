/// WebSocket close codes (RFC 6455 §7.4) and when this server sends each. A close is always
/// preceded by a control `e` (or `s`) message saying why, and the close frame carries the reason.
///
/// In the core because the engine's `Effect.close` names one (`replaced`); the shell closes with
/// the others, and the client reads them.
public enum CloseCode: Int, Sendable, CaseIterable {
    /// A normal close (the client's own, echoed).
    case normal = 1000
    /// The server is shutting down (SIGTERM/SIGINT).
    case goingAway = 1001
    /// The client broke the framing rules: an unmasked frame (RFC 6455 §5.1).
    case protocolError = 1002
    /// A binary frame: the v5 protocol is text only.
    case unsupportedData = 1003
    /// The peer's close had no code (received only, never sent).
    case noStatus = 1005
    /// A message that is not JSON or not a v5 envelope.
    case invalidPayload = 1007
    /// Policy: an unsupported protocol version `v`, or a client too slow to read what it is sent.
    case policyViolation = 1008
    /// A message (or count-prefixed series of pieces) over `--max-message-bytes`.
    case messageTooBig = 1009
    /// The server cannot serve the connection's namespace now: a cluster node whose Redis lost
    /// that namespace's history (the SDKs reconnect with backoff).
    case internalError = 1011
    /// A newer connection of the same client (`ls` names this session) replaced it.
    case replaced = 4001
    /// An operator closed it (`POST /.admin/connections/{session}/close`).
    case closedByOperator = 4002
}
