/// The engine's state for one client connection.
struct Connection {
    let id: ConnectionID
    let namespace: String
    let sessionID: String
    var credentials: Credentials = .unauthenticated
    /// Untagged listens, by path.
    var listens: Set<Path> = []
    var onDisconnect = OnDisconnectQueue()
}
