/// A connection's frames waiting for the socket to become writable, and how many bytes that is
/// (the slow-reader limit is on it). Most connections never queue: frames are written through
/// while nothing is queued, so an empty queue keeps no buffer.
struct OutboundQueue {
    private var frames: [OutFrame] = []
    private var head = 0
    /// Payload bytes queued.
    private(set) var bytes = 0

    var isEmpty: Bool { head == frames.count }
    var count: Int { frames.count - head }

    /// The frame that leaves next.
    var first: OutFrame? { head < frames.count ? frames[head] : nil }

    mutating func append(_ frame: OutFrame) {
        frames.append(frame)
        bytes += frame.payloadCount
    }

    mutating func popFirst() -> OutFrame? {
        guard head < frames.count else { return nil }
        let frame = frames[head]
        head += 1
        bytes -= frame.payloadCount
        if head == frames.count {
            // Drained: free the buffer (at 20k connections a kept buffer is ~150 bytes each).
            frames = []
            head = 0
        }
        return frame
    }

    /// Drops everything queued (a connection closed as too slow).
    mutating func removeAll() {
        frames = []
        head = 0
        bytes = 0
    }

    /// Whether `limit` bytes are exceeded: the reader is too slow to keep.
    func exceeds(_ limit: Int) -> Bool { bytes > limit }
}
