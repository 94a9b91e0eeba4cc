import CLibWebSockets
import PresenceCore

/// One connection of a ``WebSocketClient``, confined to its service thread: the handshake and
/// close state, the frames waiting for `CLIENT_WRITEABLE`, and the fragments of the message being
/// received.
final class ClientSocket {
    let id: WebSocketConnectionID
    var wsi: OpaquePointer?
    var established = false
    var paused = false
    /// A clean close was asked for: flush the queue, then the close frame with `closeCode`.
    var closing = false
    var closeStarted = false
    /// Counted in the close handshakes in flight.
    var closeCounted = false
    var closeCode = CloseCode.normal
    var aborted = false
    var peerCloseCode: UInt16?
    var peerCloseReason = ""
    var queue: [QueuedFrame] = []
    var queueHead = 0
    /// The fragments received so far of an unfinished message.
    var rx: [UInt8] = []
    var rxBinary = false
    /// A message passed the size limit: the rest of it is dropped and the connection closed (1009).
    var messageTooLarge = false

    init(id: WebSocketConnectionID) { self.id = id }

    var hasQueuedFrames: Bool { queueHead < queue.count }

    /// Queues `bytes` as one message, or as fragments of at most `fragment` bytes.
    func enqueue(_ bytes: [UInt8], binary: Bool, fragment: Int) {
        let base: Int32 = binary ? Int32(LWS_WRITE_BINARY.rawValue) : Int32(LWS_WRITE_TEXT.rawValue)
        let continuation = Int32(LWS_WRITE_CONTINUATION.rawValue)
        let noFin = Int32(LWS_WRITE_NO_FIN.rawValue)
        if fragment <= 0 || bytes.count <= fragment {
            queue.append(QueuedFrame(bytes: bytes, range: 0..<bytes.count, flags: base, lastOfMessage: true))
            return
        }
        var start = 0
        while start < bytes.count {
            let end = min(start + fragment, bytes.count)
            var flags = start == 0 ? base : continuation
            if end < bytes.count { flags |= noFin }
            queue.append(QueuedFrame(bytes: bytes, range: start..<end, flags: flags, lastOfMessage: end == bytes.count))
            start = end
        }
    }

    /// The next frame to write, taken off the queue.
    func dequeue() -> QueuedFrame? {
        guard queueHead < queue.count else { return nil }
        let frame = queue[queueHead]
        queueHead += 1
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 16)
            queueHead = 0
        }
        return frame
    }

    func dropQueue() {
        queue.removeAll()
        queueHead = 0
    }
}

/// A frame waiting to be written by the client transport: a range of a message's bytes (all of
/// it, or one fragment) and its lws write flags.
struct QueuedFrame {
    var bytes: [UInt8]
    var range: Range<Int>
    var flags: Int32
    var lastOfMessage: Bool
}
