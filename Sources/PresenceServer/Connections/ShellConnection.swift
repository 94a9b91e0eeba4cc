/// The shell's per-socket state for one WebSocket connection, in one group per part that owns it:
/// the receiver (WebSocket route), the outbound queue, delivery lane and close (outbound path), the
/// liveness clock (liveness sweep), and what operators see. Other parts read these fields; each
/// group is written only by its owner. Loop thread only.
final class ShellConnection: DueFramesHolder {
    let id: UInt64
    let wsi: OpaquePointer
    /// Its socket, for the frame mask check (`MaskTap`).
    let socket: Int32
    let remote: String
    let userAgent: String?
    let connectedAt: Int64

    // MARK: Inbound (WebSocketRoute, InboundThrottle)
    var receiver: MessageReceiver
    var budget: MessageBudget
    /// Its reading was paused at least once (logged once per connection).
    var wasThrottled = false
    /// When the last whole message arrived (operators' view).
    var lastFrameAt: Int64

    // MARK: Outbound (Outbox; read and written for every push, loop thread only: no dynamic
    // exclusivity checks)
    @exclusivity(unchecked) var queue = OutboundQueue()
    @exclusivity(unchecked) var lane = DeliveryLane<HeldMessage>()
    /// Set when the server decided to close: what is queued is flushed, then a close frame.
    var closing: (code: Int, reason: String)?
    /// When the server's close frame went out: the client's close (or the liveness sweep, after
    /// `Outbox.closeLingerMilliseconds`) ends the connection; what it sends meanwhile is discarded.
    var closeSentAt: Int64?
    /// A PING waits for the queue ahead of it to drain.
    var pingDue = false
    /// Its place among the connections with frames due this turn (`DueFrames`), -1 for none.
    @exclusivity(unchecked) var dueSlot: Int32 = -1
    /// When each numbered write request arrived (monotonic ns), to time write-to-ack.
    var writeStarted: [Int: UInt64] = [:]
    var bytesIn = 0
    var bytesOut = 0

    // MARK: Liveness (heard by the WebSocket route, judged by LivenessSweep)
    var liveness: LivenessClock

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
}

/// A message held by the durability barrier: its frames, and the request it acknowledges.
struct HeldMessage {
    let frames: [OutFrame]
    let reply: Int?
}
