import PresenceCore
import PresenceWire

/// How large a request may be, and what happens when the server says one was too large.
///
/// A request over ``ClientConnection/maxRequestBytes`` is refused here, never sent. That limit is
/// the client's own (``ClientConfiguration/maxMessageBytes``), or what a presence server takes by
/// default (``ClientConfiguration/maxRequestBytes``), or, once the server closed a connection with
/// 1009 (message too big) stating its limit, that limit. After such a close the requests kept for
/// resending that no longer fit are refused as well: resending them would be refused again, on
/// every reconnect, forever.
extension ClientConnection {
    public enum RequestLimit: Equatable, Sendable {
        /// ``ClientConfiguration/maxMessageBytes``.
        case client
        /// ``ClientConfiguration/maxRequestBytes``: what a presence server takes by default.
        case serverDefault
        /// Stated by the server when it closed a connection with 1009.
        case server
    }

    /// The server closed with 1009: a request of this client was larger than it takes. With a
    /// limit stated in the close's reason and lower than the one in force, the client adopts it,
    /// refuses the kept writes and onDisconnect registrations over it, and returns true: the close
    /// is then a loss like any other (reconnect, resend the rest). Otherwise nothing this client
    /// holds can be left out, so it gives up (returns false) rather than resend forever.
    mutating func serverRefusedSize(_ close: ServerClose, now: Int64) -> Bool {
        guard case .tooLarge(let limit)? = FrameAssembler.Failure(reason: close.reason), limit < maxRequestBytes else {
            let why = close.reason.isEmpty ? "a message was too big" : close.reason
            giveUp("the server closed the connection (\(close.code): \(why)), and no request this client holds is over a smaller limit; not resending")
            return false
        }
        maxRequestBytes = limit
        requestLimit = .server
        var refused: [ClientEvent] = []
        var refusedWrites: Set<WriteID> = []
        for write in pendingWrites {
            if let failure = oversized(action: write.action.rawValue, path: write.path, data: write.data) {
                refused.append(.writeCompleted(write.id, failure))
                refusedWrites.insert(write.id)
            }
        }
        var refusedRegistrations: Set<OnDisconnectID> = []
        for registration in onDisconnectRegistrations {
            if let failure = oversized(action: registration.action.rawValue, path: registration.path, data: registration.data) {
                refused.append(.onDisconnectCompleted(registration.id, failure))
                refusedRegistrations.insert(registration.id)
            }
        }
        pendingWrites.removeAll { refusedWrites.contains($0.id) }
        onDisconnectRegistrations.removeAll { refusedRegistrations.contains($0.id) }
        for event in refused { deliver(event) }
        return true
    }

    /// The smallest limit a presence server can be given (`--max-message-bytes`): a request up to
    /// this size is never the one a server refused for its size.
    public static let smallestServerLimit = 16_384
    /// Connections lost in a row with the same large write in flight before it is refused.
    public static let lossesBeforeRefusingLargeWrite = 3

    /// The connection was lost without a close frame saying why. A server that refuses a message for its size closes at once, and the rest
    /// of the message, still arriving, can make its TCP stack reset the connection before the
    /// close frame is read: then the client never learns the limit. So when the same write, sent
    /// and over ``smallestServerLimit``, was unacknowledged at ``lossesBeforeRefusingLargeWrite``
    /// losses in a row, it is refused with an error instead of being resent for ever.
    mutating func lostWithLargeWriteInFlight() {
        guard let write = pendingWrites.first(where: { $0.request != nil && requestBytes($0) > Self.smallestServerLimit }) else {
            suspectWrite = nil
            return
        }
        let losses = suspectWrite?.id == write.id ? suspectWrite!.losses + 1 : 1
        guard losses >= Self.lossesBeforeRefusingLargeWrite else {
            suspectWrite = (write.id, losses)
            return
        }
        suspectWrite = nil
        pendingWrites.removeAll { $0.id == write.id }
        deliver(.writeCompleted(write.id, RequestFailure(.invalidData(
            "the connection was lost \(losses) times in a row while this \(requestBytes(write))-byte write was unacknowledged; "
                + "not resending it (it may be larger than the server takes: max message size)"))))
    }

    private func requestBytes(_ write: PendingWrite) -> Int {
        Self.requestBytes(action: write.action.rawValue, path: write.path, data: write.data)
    }

    /// The size of a request with the longest request number (the number is not known yet).
    static func requestBytes(action: String, path: Path, data: JSON) -> Int {
        let body: JSON = .object([("p", .string(path.description)), ("d", data)])
        return ClientCodec.request(Int.max, action: action, body: body).utf8.count
    }

    /// The refusal for a request that would be larger than ``maxRequestBytes``, nil when it fits.
    func oversized(action: String, path: Path, data: JSON) -> RequestFailure? {
        let bytes = Self.requestBytes(action: action, path: path, data: data)
        guard bytes > maxRequestBytes else { return nil }
        let limit = switch requestLimit {
        case .client: "this client's limit of \(maxRequestBytes) bytes"
        case .serverDefault: "the \(maxRequestBytes) bytes a presence server takes by default"
        case .server: "the server's limit of \(maxRequestBytes) bytes"
        }
        return RequestFailure(.invalidData("the request is \(bytes) bytes, larger than \(limit) (max message size)"))
    }
}
