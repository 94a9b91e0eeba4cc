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

    /// A message arriving in fragments, or count-prefixed pieces being joined: held only while
    /// one is (nearly every message is one whole frame, and every connection pays for this).
    private final class Partial {
        var buffer: [UInt8] = []
        var assembler: FrameAssembler

        init(maxMessageBytes: Int) { assembler = FrameAssembler(maxMessageBytes: maxMessageBytes) }
    }

    let maxMessageBytes: Int
    private var partial: Partial?

    init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    /// One received fragment; `messageEnds` when it is the last of its WebSocket message;
    /// `announced`: payload bytes of its frame still to come (the frame header says how many).
    mutating func receive(_ fragment: UnsafeRawBufferPointer, messageEnds: Bool, announced: Int = 0) -> Output {
        let (total, overflow) = ((partial?.buffer.count ?? 0) + fragment.count).addingReportingOverflow(announced)
        if overflow || total > maxMessageBytes {
            partial?.buffer = []
            forgetIfIdle()
            return .tooLarge
        }
        guard messageEnds else {
            held().buffer.append(contentsOf: fragment)
            return .nothing
        }
        let frame: [UInt8]
        if let partial, !partial.buffer.isEmpty {
            partial.buffer.append(contentsOf: fragment)
            frame = partial.buffer
            partial.buffer = []
        } else {
            frame = Array(fragment)
        }
        defer { forgetIfIdle() }
        do {
            let output: FrameAssembler.Output
            if let partial {
                output = try partial.assembler.accept(frame)
            } else {
                var assembler = FrameAssembler(maxMessageBytes: maxMessageBytes)
                output = try assembler.accept(frame)
                // A count: the pieces that follow are joined in the held state.
                if assembler.isCollecting { held().assembler = assembler }
            }
            guard case .message(let bytes) = output else { return .nothing }
            return .message(bytes)
        } catch {
            return .piecesTooLarge(error)
        }
    }

    private mutating func held() -> Partial {
        if let partial { return partial }
        let created = Partial(maxMessageBytes: maxMessageBytes)
        partial = created
        return created
    }

    private mutating func forgetIfIdle() {
        if let held = partial, held.buffer.isEmpty, !held.assembler.isCollecting { partial = nil }
    }
}
