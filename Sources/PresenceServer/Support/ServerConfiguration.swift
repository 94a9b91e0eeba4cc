import PresenceWire

/// Everything the shell needs to start listening. Built from flags by `presence-server`.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9000
    /// Largest client message accepted (after joining fragments and count-prefixed pieces).
    public var maxMessageBytes = FrameAssembler.defaultMaxMessageBytes
    /// Per-connection lws receive buffer. Small keeps idle connections cheap; fragments are joined.
    public var rxBufferBytes = 1024
    /// Seconds without traffic before the server sends a WebSocket ping.
    public var pingIntervalSeconds = 20
    /// Seconds without any frame or pong before the connection is dropped.
    public var idleTimeoutSeconds = 60
    /// Outbound bytes queued for one connection before it is closed as too slow.
    public var maxQueuedBytes = 16 * 1_048_576
    /// Past saturation (`WriterPushback`): over this many writes not yet durable, or this many
    /// bytes queued for sockets in all, the server stops reading from connections that write
    /// until half has drained (0 turns a measure off). 5,000 writes is about 150 ms of commits at
    /// one core's saturation (30–40k writes/s); normal load keeps a few hundred.
    public var pushbackPendingWrites = 5_000
    public var pushbackQueuedBytes = 64 * 1_048_576
    /// A connection's queue that has sent nothing for this long waits for a socket nobody reads:
    /// its bytes no longer count toward `pushbackQueuedBytes`, and push-back that has not drained
    /// after ten times as long drops the connections holding the most as slow readers (issue 16).
    public var pushbackStallMilliseconds: Int64 = 100
    /// Load shedding past saturation (`WriteShedding`): a 100 ms window with the loop busy at
    /// least `shedBusyPercent` of it while writers' input waits unread longer than
    /// `shedReadDelayMilliseconds`, or with more than `shedPendingWrites` writes not yet durable,
    /// is overloaded; three in a row start refusing a share of data writes with `unavailable`
    /// (0 turns a signal off, both 0 turn shedding off). It comes before push-back: its pending
    /// bound is under `pushbackPendingWrites` (5,000), which stays as the backstop; 4,000 delivered the
    /// most with a bounded p99 at 40k writes/s (docs/performance.md, "Past saturation: shedding writes").
    public var shedBusyPercent = 95
    public var shedReadDelayMilliseconds = 100
    public var shedPendingWrites = 4_000
    /// Loop time all reads in slices take together in one turn of the loop, before as long idle
    /// (`SlicedReplies`), and one WebSocket connection's messages in one turn (`TurnShare`): what
    /// one client adds to other clients' latency (issue 16). 250 µs kept a bystander's p99 within
    /// 2× under the big-read and tagged-window attacks where 1,000 µs did not (docs/robustness.md).
    public var sliceMicroseconds: Int64 = 250
    /// Inbound WebSocket messages one connection may send per second, on average (0: unlimited),
    /// and at once (the bucket's size). Over it, the server stops reading from the connection until
    /// its budget refills (`MessageBudget`). A message costs one, plus one per 16 KiB, plus one per
    /// 100 µs the loop spent handling it.
    public var maxMessagesPerSecond = 1_000
    public var messageBurst = 2_000
    /// REST request bodies being read, all connections together (reserved from `Content-Length`
    /// when a head arrives); a request that would go over is answered 503 with `Retry-After`.
    public var maxPendingBodyBytes = 32 * 1_048_576
    /// Seconds a client has to send an HTTP request's head (lws drops it after), and then its body
    /// (plus the time for its length at 64 KiB/s).
    public var httpTimeoutSeconds = 10
    public var defaultNamespace = "default"
    /// PEM certificate (chain) and private key: the port then serves wss:// and https:// only.
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// WebSocket connections one remote address may hold at once (0 = unlimited).
    public var maxConnectionsPerAddress = 0
    /// New WebSocket connections per second from one remote address (0 = unlimited).
    public var maxConnectionRatePerAddress = 0
    /// New connections (of any address) accepted in one turn of the loop; the rest wait in the
    /// kernel's queue for the next turns (`AcceptGovernor`; 0 = as many as are waiting, lws's way).
    public var maxAcceptsPerTurn = 4
    /// Reverse proxies whose `X-Forwarded-For` names the client (per-address limits, operators'
    /// views, logs). From any other peer the header is ignored: clients could forge it.
    public var trustedProxies: Set<String> = []
    /// Seconds between `keep-alive` events on REST streams.
    public var streamKeepAliveSeconds = 30
    /// Where limit checks are appended as JSON lines (analytics); nil for none.
    public var limitEventLogPath: String?

    public init() {}
}
