import PresenceWire

/// A connection's inbound path below the decoder: joins WebSocket fragments into messages
/// (bounded by `--max-message-bytes`), then count-prefixed pieces into protocol messages.
///
/// An oversized message is read to its end and dropped before the connection is refused with 1009:
/// closing mid-message would reset the socket before the client could read why.
struct MessageReceiver {
    enum Output: Equatable {
        /// Nothing to decode yet (a fragment, a piece, the `"0"` keepalive).
        case nothing
        /// A whole protocol message.
        case message([UInt8])
        /// A WebSocket message went over the size limit (it has been read to its end).
        case tooLarge
        /// Count-prefixed pieces went over the size limit together.
        case piecesTooLarge(FrameAssembler.Failure)
    }

    private var buffer: [UInt8] = []
    private var discardingOversized = false
    private var assembler: FrameAssembler

    init(maxMessageBytes: Int) {
        assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
    }

    var maxMessageBytes: Int { assembler.maxMessageBytes }

    /// One received fragment; `messageEnds` when it is the last of its WebSocket message.
    mutating func receive(_ fragment: UnsafeRawBufferPointer, messageEnds: Bool) -> Output {
        if discardingOversized || buffer.count + fragment.count > maxMessageBytes {
            discardingOversized = true
            buffer = []
            guard messageEnds else { return .nothing }
            discardingOversized = false
            return .tooLarge
        }
        buffer.append(contentsOf: fragment)
        guard messageEnds else { return .nothing }
        let frame = buffer
        buffer = []
        do {
            guard case .message(let bytes) = try assembler.accept(frame) else { return .nothing }
            return .message(bytes)
        } catch {
            return .piecesTooLarge(error)
        }
    }
}
