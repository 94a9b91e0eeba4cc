/// The shell's per-socket state for one WebSocket connection, in one group per part that owns it:
/// the receiver (WebSocket route), the outbound queue, delivery lane and close (outbound path), the
/// liveness clock (liveness sweep), and what operators see. Other parts read these fields; each
/// group is written only by its owner. Loop thread only.
///
/// Every connection pays for this object (20,000 idle listeners are the shape `bench/connections.sh`
/// measures), so what an idle connection does not need is allocated when first needed (a message
/// in pieces, a queue, a close), and the fields are ordered widest first so none pads another:
/// keep it within malloc's 208-byte class (`ShellConnectionLayoutTests`).
final class ShellConnection: DueFramesHolder {
    let id: UInt64
    let wsi: OpaquePointer
    let remote: String
    let userAgent: String?
    let connectedAt: Int64
    /// When the last whole message arrived (operators' view).
    var lastFrameAt: Int64

    // MARK: Inbound (WebSocketRoute, InboundThrottle)
    var receiver: MessageReceiver
    var budget: MessageBudget

    // MARK: Outbound (Outbox; read and written for every push, loop thread only: no dynamic
    // exclusivity checks)
    @exclusivity(unchecked) var queue = OutboundQueue()
    @exclusivity(unchecked) var lane = DeliveryLane<HeldMessage>()
    /// Set when the server decided to close: what is queued is flushed, then a close frame.
    var closing: Closing?
    /// When each numbered write request arrived (monotonic ns), to time write-to-ack.
    var writeStarted: [Int: UInt64] = [:]
    var bytesIn = 0
    var bytesOut = 0

    // MARK: Liveness (heard by the WebSocket route, judged by LivenessSweep)
    var liveness: LivenessClock

    /// Its socket, for the frame mask check (`MaskTap`).
    let socket: Int32
    /// Its place among the connections with frames due this turn (`DueFrames`), -1 for none.
    @exclusivity(unchecked) var dueSlot: Int32 = -1
    /// Its reading was paused at least once (logged once per connection).
    var wasThrottled = false
    /// A PING waits for the queue ahead of it to drain.
    var pingDue = false
    /// Not read from while the server is past saturation (`WriterPushback`); the liveness sweep
    /// does not judge it meanwhile (its PONGs are not read either).
    var pushedBack = false

    /// When the server's close frame went out: the client's close (or the liveness sweep, after
    /// `Outbox.closeLingerMilliseconds`) ends the connection; what it sends meanwhile is discarded.
    var closeSentAt: Int64? { closing?.sentAt }

    init(id: UInt64, wsi: OpaquePointer, socket: Int32 = -1, remote: String, userAgent: String?, now: Int64, maxMessageBytes: Int,
         budget: MessageBudget? = nil) {
        self.id = id
        self.wsi = wsi
        self.socket = socket
        self.remote = remote
        self.userAgent = userAgent
        self.connectedAt = now
        self.lastFrameAt = now
        self.receiver = MessageReceiver(maxMessageBytes: maxMessageBytes)
        self.budget = budget ?? MessageBudget(perSecond: 0, burst: 1, now: now)
        self.liveness = LivenessClock(now: now)
    }

    /// A close the server decided (or the peer's, for the log line): its code and reason, and
    /// when the close frame went out. Boxed: nearly every connection is never closed by the server.
    final class Closing {
        let code: Int
        let reason: String
        var sentAt: Int64?

        init(code: Int, reason: String) {
            self.code = code
            self.reason = reason
        }
    }
}

/// A message held by the durability barrier: its frames, and the request it acknowledges.
struct HeldMessage {
    let frames: [OutFrame]
    let reply: Int?
}
