/// Bounds on what one client can make the engine hold or compute, so that one connection (or
/// none: namespaces) cannot stall or exhaust the server for everyone. Each refusal is a `too_big`
/// reply whose message names the limit and its flag (the Firebase SDKs give up on `too_big`, they
/// do not retry), and is logged once per connection (`Engine.takeNotices`). See docs/robustness.md.
public struct EngineLimits: Sendable, Equatable {
    /// Active listens one connection may hold (`--max-listens-per-connection`).
    public var maxListensPerConnection: Int
    /// Distinct queries (tagged listens with a filter) one connection may hold at one location
    /// (`--max-queries-per-location`). A write that moves a child there computes and pushes each
    /// of them (a message per tag): this bounds what one write costs per such connection.
    public var maxQueriesPerLocation: Int
    /// onDisconnect ops one connection may hold (`--max-ondisconnect-ops`). They run in one turn
    /// of the loop when it leaves (one atomic write), about 5 µs of the loop and of storage each:
    /// 256 keeps that turn near a millisecond (1,000 made it 3 ms, and other clients waited for it).
    public var maxOnDisconnectOps: Int
    /// Total size of those ops' values, about their length as JSON (`--max-ondisconnect-bytes`).
    public var maxOnDisconnectBytes: Int
    /// The largest answer to one read (`g`, a listen's initial data, REST `GET`, a stream's first
    /// event), about its length as JSON (`--max-read-bytes`). Estimated before anything is
    /// serialized, stopping as soon as the budget is passed, so a refusal costs O(budget). Serializing
    /// costs the loop about 45 ms per MiB on the project's machine: 8 MiB keeps one read under ~0.4 s.
    public var maxReadBytes: Int
    /// The most data one hash may cover, about its length as JSON (`--max-hash-bytes`): a
    /// transaction (`p` with `h`), a REST `if-match` write and an ETag (`X-Firebase-ETag`,
    /// `if-none-match`) hash the whole value at their location, at once, in the loop: about 30 ms
    /// per MiB here (a 300,000-child location held it for 4.5 s before the hash sorted keys the
    /// fast way), so 16 KiB is well under a millisecond. Checked by the same walk as
    /// `maxReadBytes`, which stops at the budget, so a refusal costs O(budget).
    public var maxHashBytes: Int
    /// Namespaces that may hold data or rules at once (`--max-namespaces`). A namespace that holds
    /// neither and has no connection, listener or held op is released from memory.
    public var maxNamespaces: Int
    /// A `g`, a listen, a REST `GET` or a stream whose answer passes this many bytes (about, as
    /// JSON) is answered as a `DeferredRead` (a listen's or stream's data as `Outbound.listenData`,
    /// a REST read as `DirectOutcome.slicedRead`):
    /// the shell computes and serializes it in slices between other clients' messages instead of
    /// holding the loop (`--slice-reads-over`). 0: every read is answered at once (the default in
    /// process, where nothing would slice it; the server's default is `serverSliceReadsOver`).
    public var sliceReadsOver: Int

    /// `presence-server`'s default for `sliceReadsOver`: about 1 ms of serializing.
    public static let serverSliceReadsOver = 65_536

    public init(maxListensPerConnection: Int = 10_000, maxQueriesPerLocation: Int = 20, maxOnDisconnectOps: Int = 256, maxOnDisconnectBytes: Int = 1_048_576,
                maxReadBytes: Int = 8 * 1_048_576, maxHashBytes: Int = 16_384, maxNamespaces: Int = 10_000, sliceReadsOver: Int = 0) {
        self.sliceReadsOver = sliceReadsOver
        self.maxListensPerConnection = maxListensPerConnection
        self.maxQueriesPerLocation = maxQueriesPerLocation
        self.maxOnDisconnectOps = maxOnDisconnectOps
        self.maxOnDisconnectBytes = maxOnDisconnectBytes
        self.maxReadBytes = maxReadBytes
        self.maxHashBytes = maxHashBytes
        self.maxNamespaces = maxNamespaces
    }

    public static let `default` = EngineLimits()

    /// The limits that are logged once per connection (bits of `Connection.limitsLogged`).
    enum Kind: UInt8 {
        case listens = 1
        case onDisconnectOps = 2
        case onDisconnectBytes = 4
        case read = 8
        case queriesPerLocation = 16
        case hash = 32
    }
}

extension Engine {
    /// Lines for the server's log, taken by the shell after each step (a connection's first
    /// refusal by each per-connection limit, namespaces refused at the cap).
    public func takeNotices() -> [String] {
        defer { notices.removeAll(keepingCapacity: true) }
        return notices
    }

    /// The refusal for one limit, logged the first time this connection meets it.
    func refuse(_ kind: EngineLimits.Kind, _ message: String, connection: Connection?) -> EngineError {
        if let connection, connection.limitsLogged & kind.rawValue == 0 {
            connection.limitsLogged |= kind.rawValue
            let who = connection.credentials.uid.map { " uid \($0)" } ?? ""
            notices.append("connection \(connection.id.raw) (session \(connection.sessionID), ns \(connection.namespace)\(who)): \(message); "
                + "further refusals of this kind on this connection are not logged")
        }
        return .tooBig(message)
    }
}
