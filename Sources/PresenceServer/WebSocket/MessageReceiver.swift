import PresenceWire

/// A connection's inbound path below the decoder: joins WebSocket fragments into messages
/// (bounded by `--max-message-bytes`), then count-prefixed pieces into protocol messages.
///
/// A message is refused (1009) as soon as what arrived, plus what its frame header announces is
/// still to come, is over the limit: nothing of it is kept. The close is a closing handshake (the
/// outbound path keeps reading, and discarding, until the client's close), so the client's reset
/// socket cannot swallow the reason.
struct MessageReceiver {
    enum Output: Equatable {
        /// Nothing to decode yet (a fragment, a piece, the `"0"` keepalive).
        case nothing
        /// A whole protocol message.
        case message([UInt8])
        /// A WebSocket message went over the size limit (or announced it would).
        case tooLarge
        /// Count-prefixed pieces went over the size limit together.
        case piecesTooLarge(FrameAssembler.Failure)
    }

    private var buffer: [UInt8] = []
    private var assembler: FrameAssembler

    init(maxMessageBytes: Int) {
        assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
    }

    var maxMessageBytes: Int { assembler.maxMessageBytes }

    /// One received fragment; `messageEnds` when it is the last of its WebSocket message;
    /// `announced`: payload bytes of its frame still to come (the frame header says how many).
    mutating func receive(_ fragment: UnsafeRawBufferPointer, messageEnds: Bool, announced: Int = 0) -> Output {
        let (total, overflow) = (buffer.count + fragment.count).addingReportingOverflow(announced)
        if overflow || total > maxMessageBytes {
            buffer = []
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
