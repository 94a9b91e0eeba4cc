/// The verdict of a read or write check, with a human-readable reason for logs.
public struct RuleDecision: Sendable, Equatable, CustomStringConvertible {
    public var allowed: Bool
    /// Which rule at which path allowed or denied the operation.
    public var reason: String

    public init(allowed: Bool, reason: String) {
        self.allowed = allowed
        self.reason = reason
    }

    public var description: String { (allowed ? "allowed: " : "denied: ") + reason }
}
