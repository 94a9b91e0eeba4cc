/// Several WebSocket text messages for one connection gathered into one buffer, so that one
/// `send` carries all of them: under load a watcher has several pushes due in one turn of the loop,
/// and the kernel's cost is per send (and per segment delivered), not per byte.
///
/// The frames are written here rather than by lws (it frames one message per `lws_write`): a
/// server's frames are unmasked, a header of 2, 4 or 10 bytes then the payload (RFC 6455 §5.2),
/// FIN set, opcode text; no extension is negotiated (the context offers none). The buffer and the
/// buffer keeps its capacity from one batch to the next, so gathering allocates nothing.
/// Pure: the shell writes `wire` with one raw lws write.
struct FrameBatch {
    /// Bytes one batch may take: lws sends at most its protocol's `tx_packet_size` (set to this)
    /// per `send`. A frame larger than this (none is: `FrameSplitter` cuts at 16 KiB) goes alone.
    /// (A WebSocket tunnelled in an HTTP/2 stream cannot take raw bytes: the shell writes its
    /// frames one by one instead.)
    static let budget = 32_768

    /// `OutFrame.headroom` bytes lws may use, then the frames as they go on the wire.
    private(set) var wire: [UInt8]
    /// Frames gathered, and their payload bytes (for the counters).
    private(set) var frameCount = 0
    private(set) var payloadBytes = 0

    init() {
        wire = [UInt8](repeating: 0, count: OutFrame.headroom)
        wire.reserveCapacity(OutFrame.headroom + Self.budget + 16)
    }

    var isEmpty: Bool { frameCount == 0 }
    /// Bytes on the wire (headers and payloads).
    var byteCount: Int { wire.count - OutFrame.headroom }

    /// Whether `frame` may join: the first always does, the others while the batch stays within
    /// `budget`.
    func fits(_ frame: OutFrame) -> Bool {
        frameCount == 0 || byteCount + Self.headerCount(frame.payloadCount) + frame.payloadCount <= Self.budget
    }

    mutating func append(_ frame: OutFrame) {
        frameCount += 1
        let count = frame.payloadCount
        payloadBytes += count
        wire.append(0x81) // FIN, text
        if count < 126 {
            wire.append(UInt8(count))
        } else if count < 65_536 {
            wire.append(126)
            wire.append(UInt8(truncatingIfNeeded: count >> 8))
            wire.append(UInt8(truncatingIfNeeded: count))
        } else {
            wire.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { wire.append(UInt8(truncatingIfNeeded: count >> shift)) }
        }
        frame.storage.withUnsafeBufferPointer { storage in
            wire.append(contentsOf: UnsafeBufferPointer(rebasing: storage[OutFrame.headroom...]))
        }
    }

    /// The wire bytes, for the one write (headroom first).
    mutating func withWire<T>(_ body: (inout UnsafeMutableBufferPointer<UInt8>) -> T) -> T {
        wire.withUnsafeMutableBufferPointer(body)
    }

    /// Empties the batch, keeping its buffers (a burst's large buffer is let go).
    mutating func reset() {
        if wire.capacity > 4 * (OutFrame.headroom + Self.budget) {
            wire = [UInt8](repeating: 0, count: OutFrame.headroom)
            wire.reserveCapacity(OutFrame.headroom + Self.budget + 16)
        } else {
            wire.removeLast(wire.count - OutFrame.headroom)
        }
        frameCount = 0
        payloadBytes = 0
    }

    /// The header's length for a payload of `count` bytes.
    static func headerCount(_ count: Int) -> Int { count < 126 ? 2 : count < 65_536 ? 4 : 10 }
}
