import PresenceWire

/// The shell's per-socket state: the lws handle, the receive buffer for fragments, the
/// count-prefix assembler and the outbound queue. Touched only on the loop thread.
final class ShellConnection {
    let id: UInt64
    let wsi: OpaquePointer
    let remote: String
    let userAgent: String?
    let connectedAt: Int64
    var lastFrameAt: Int64
    /// When anything (a frame, a fragment, a PONG) last arrived, and when the liveness sweep last
    /// pinged; see `LWSServer+Liveness`.
    var lastHeardAt: Int64
    var pingSentAt: Int64 = 0
    /// A PING waits for the queue ahead of it to drain.
    var pingDue = false
    /// The liveness sweep dropped it; lws will report CLOSED.
    var hungUp = false
    var bytesIn = 0
    var bytesOut = 0
    /// When each numbered write request arrived (monotonic ns), to time write-to-ack.
    var writeStarted: [Int: UInt64] = [:]
    var receiveBuffer: [UInt8] = []
    /// Set when the message being received went over the size limit: the rest of it is read and
    /// dropped, then the connection is closed with 1009 (closing mid-message would reset the socket
    /// before the client could read why).
    var discardingOversizedMessage = false
    var assembler: FrameAssembler
    var queue: [OutFrame] = []
    var queueHead = 0
    var queuedBytes = 0
    /// Frames held until storage reports their step durable (an ack, and everything after it).
    var held: [(sequence: UInt64, frame: OutFrame, reply: Int?)] = []
    /// Set when the server decided to close: flush what is queued, then close with this.
    var pendingClose: (code: Int, reason: String)?

    init(id: UInt64, wsi: OpaquePointer, remote: String, userAgent: String?, now: Int64, maxMessageBytes: Int) {
        self.id = id
        self.wsi = wsi
        self.remote = remote
        self.userAgent = userAgent
        self.connectedAt = now
        self.lastFrameAt = now
        self.lastHeardAt = now
        self.assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
    }

    var hasQueuedFrames: Bool { queueHead < queue.count }

    func enqueue(_ frame: OutFrame) {
        queue.append(frame)
        queuedBytes += frame.payloadCount
    }

    func dequeue() -> OutFrame? {
        guard queueHead < queue.count else { return nil }
        let frame = queue[queueHead]
        queueHead += 1
        queuedBytes -= frame.payloadCount
        if queueHead == queue.count {
            // Drained: free the buffer (most connections rarely queue; at 20k connections a kept
            // buffer is ~150 bytes each).
            queue = []
            queueHead = 0
        }
        return frame
    }
}
