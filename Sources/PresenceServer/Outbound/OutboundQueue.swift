/// A connection's frames waiting for the socket to become writable, and how many bytes that is
/// (the slow-reader limit is on it). Most connections never queue: frames are written through
/// while nothing is queued, so an empty queue is one nil reference (its storage exists only while
/// something is queued; at 20k connections each kept word is paid 20k times).
struct OutboundQueue {
    private final class Storage {
        var frames: [OutFrame] = []
        var head = 0
        var bytes = 0
    }

    private var storage: Storage?

    var isEmpty: Bool { storage == nil }
    var count: Int { storage.map { $0.frames.count - $0.head } ?? 0 }
    /// Payload bytes queued.
    var bytes: Int { storage?.bytes ?? 0 }

    /// The frame that leaves next.
    var first: OutFrame? { storage.map { $0.frames[$0.head] } }

    mutating func append(_ frame: OutFrame) {
        if storage == nil || !isKnownUniquelyReferenced(&storage!) { storage = copied() }
        storage!.frames.append(frame)
        storage!.bytes += frame.payloadCount
    }

    mutating func popFirst() -> OutFrame? {
        guard storage != nil else { return nil }
        if !isKnownUniquelyReferenced(&storage!) { storage = copied() }
        let queue = storage!
        let frame = queue.frames[queue.head]
        queue.head += 1
        queue.bytes -= frame.payloadCount
        // Drained: free the buffer.
        if queue.head == queue.frames.count { storage = nil }
        return frame
    }

    /// Drops everything queued (a connection closed as too slow).
    mutating func removeAll() {
        storage = nil
    }

    /// Whether `limit` bytes are exceeded: the reader is too slow to keep.
    func exceeds(_ limit: Int) -> Bool { bytes > limit }

    /// A storage of its own (value semantics when a queue was copied), or a new one.
    private func copied() -> Storage {
        let copy = Storage()
        if let storage {
            copy.frames = Array(storage.frames[storage.head...])
            copy.bytes = storage.bytes
        }
        return copy
    }
}
