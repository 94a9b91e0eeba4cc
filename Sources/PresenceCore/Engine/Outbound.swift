/// A message for one or more clients. The wire codec turns it into text once per send.
public enum Outbound: Sendable, Equatable {
    case hello(timestamp: Int64, host: String, sessionID: String)
    case pong
    /// The reply to request `number`.
    case reply(number: Int, result: Result<ReplyData, EngineError>)
    /// `d`: overwrite the value at `path` (§4.1).
    case data(path: Path, value: Node, tag: Int?)
    /// `m`: replace each relative path under `path`.
    case merge(path: Path, changes: [Change], tag: Int?)
    /// A big listen's initial data, still to be computed and serialized (the shell does it in
    /// slices, `SlicedRead`), then the ok reply to request `number`. The listener is registered
    /// already: its later pushes wait behind this on the connection. Over the read budget, the
    /// reply is `tooBig` instead of the data and the ok (`Engine.refusedDeferredListen`).
    case listenData(number: Int?, read: DeferredRead, tag: Int?)
    /// `c`: the listen at `path` was revoked.
    case listenRevoked(path: Path, query: JSON?)
    /// `ac`: the connection's credential was revoked.
    case authRevoked(EngineError)
    /// Control `s`: the server shuts this connection down and the client should not reconnect.
    case shutdown(reason: String)
    /// Control `e`: a server error message the client logs.
    case serverError(String)

    public struct Change: Sendable, Equatable {
        public var path: Path
        public var value: Node
    }
}

/// The `d` of an ok reply.
public enum ReplyData: Sendable, Equatable {
    /// `""`, the reply to writes and most actions.
    case empty
    /// `{}`, the reply to listens (Android casts it to a map).
    case emptyObject
    case json(JSON)
    case node(Node)
    /// A big read's answer, still to be computed and serialized: the shell does it in slices
    /// (`SlicedRead`); it may still turn out over the read budget, and then the reply is `tooBig`.
    case deferred(DeferredRead)
}

/// What the engine asks the shell to do, in order.
public enum Effect: Sendable, Equatable {
    case send([ConnectionID], Outbound)
    case close(ConnectionID, code: CloseCode, reason: String)
}
