/// A problem with the server's auth configuration (a secret, key or admin-token file), found when
/// loading it at start-up. Not a token error: the message is meant for the operator.
public struct AuthConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
