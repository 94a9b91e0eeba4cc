import PresenceCore
import PresenceLoop
import PresenceWire

/// Big reads answered in slices (issue 16: a 6 MB `g` held the loop, and so every other client,
/// for 0.2 s). The engine answers such a read with a `DeferredRead` (`EngineLimits.sliceReadsOver`);
/// here it is computed, serialized and cut into frames a slice at a time: each turn of the loop
/// spends at most `sliceNanoseconds` on all of them together, then lets the loop read and answer
/// other clients before the next slice (a timer of 1 µs: libuv polls for I/O before it fires).
///
/// Slices take at most half of the loop's time: after a turn's slices the next wait at least as
/// long as they took (`sliceNanoseconds` of work, then as long idle; a wait under half a
/// millisecond becomes a millisecond, `LWSTimerGuard`: before it, that wait was a busy spin that
/// polled nothing). A big read's wall time grows, but the loop is idle most of the time, so other
/// clients' messages find it waiting for them rather than busy (on a shared machine, a busy process
/// also loses the CPU to others more often).
///
/// Order on the connection is kept: while a connection has a read in slices, what the outbound path
/// would send it afterwards waits here behind it (`holds`, `hold`), and all of it is handed back to
/// the outbound path, in order, when the read is done. A connection's reads run one after the other,
/// and at most `concurrentReads` connections' reads are built at once (memory: about twice the read
/// budget for each, the text and its frames; a connection that waits for its turn holds a snapshot,
/// which shares the tree's storage). The slices' loop time is charged to the connection's message budget, as
/// the time of handling its messages is (`InboundThrottle`). Loop thread only.
final class SlicedReplies {
    /// What a connection is sent, in order: a read still in slices, or a message waiting behind one.
    private enum Item {
        case read(SlicedRead, Answer, waitsFor: UInt64?)
        case framing(Framing, Answer, waitsFor: UInt64?)
        case message(frames: [OutFrame], reply: Int?, waitsFor: UInt64?)
    }

    /// Loop time all slices of one turn may take together (`--slice-microseconds`).
    let sliceNanoseconds: UInt64
    /// Connections whose reads are built at once; the others wait their turn (in arrival order),
    /// so that many connections reading big locations together hold at most this many answers.
    static let concurrentReads = 4
    /// Units of `SlicedRead` work (a child offered, a node written) between two looks at the clock.
    static let workPerStep = 256

    /// What a read in slices answers: a `g`'s reply, a listen's data (then its ok reply), or an
    /// HTTP answer (a REST `GET`, a stream's first event) whose text or refusal goes to its owner.
    enum Answer {
        case reply(number: Int)
        case listen(number: Int?, tag: Int?)
        case handOver((Result<[UInt8], EngineError>) -> Void)

        var replyNumber: Int? {
            switch self {
            case .reply(let number): number
            case .listen(let number, _): number
            case .handOver: nil
            }
        }
    }

    private var queues: [UInt64: [Item]] = [:]
    /// Connections with a read in slices, in the order they are served (round robin).
    private var turnOrder: [UInt64] = []
    private var timer: LoopTimer!
    /// Hands ready messages back to the outbound path (set by `Outbox`).
    var release: ((UInt64, [OutFrame], Int?, UInt64?) -> Void)?
    /// The refusal for a read found over the budget (the engine counts and logs it).
    var refuse: ((UInt64, String) -> EngineError)?
    /// The same for a listen's data (the engine also drops the listen).
    var refuseListen: ((UInt64, DeferredRead, Int?, String) -> EngineError)?
    /// Counts the use of a read at a location a limit guards once its text is made within the
    /// budget (`Engine.useDeferredReadLimit`): the limit's refusal, answered instead, or nil; and
    /// the storage step the answer then waits for (the use made durable).
    var admit: ((UInt64, DeferredRead) -> (EngineError?, UInt64?))?
    /// Charges loop time spent on a connection's read to its message budget.
    var charge: ((UInt64, UInt64) -> Void)?

    init(runtime: LoopRuntime, sliceMicroseconds: Int64) {
        sliceNanoseconds = UInt64(max(1, sliceMicroseconds)) * 1_000
        timer = runtime.makeTimer { [unowned self] in runSlice() }
    }

    var isActive: Bool { !queues.isEmpty }

    /// Whether messages for `id` must wait behind a read in slices.
    func holds(_ id: UInt64) -> Bool { queues[id] != nil }

    /// A deferred read's reply for connection `id`; `waitsFor` is the step's durability barrier.
    func enqueue(_ read: DeferredRead, number: Int, waitsFor: UInt64?, for id: UInt64) {
        let (prefix, suffix) = OutboundEncoder.okReplyEnvelope(number: number)
        enqueue(.read(SlicedRead(read, prefix: prefix, suffix: suffix), .reply(number: number), waitsFor: waitsFor), for: id)
    }

    /// A big listen's initial data for connection `id`, then its ok reply (which alone waits for
    /// `waitsFor`). Its later pushes come after it, as everything else held behind a read.
    func enqueueListen(_ read: DeferredRead, number: Int?, tag: Int?, waitsFor: UInt64?, for id: UInt64) {
        let (prefix, suffix) = OutboundEncoder.dataEnvelope(path: read.path, tag: tag)
        enqueue(.read(SlicedRead(read, prefix: prefix, suffix: suffix), .listen(number: number, tag: tag), waitsFor: waitsFor), for: id)
    }

    /// A read for HTTP connection `id` (an id of its own, not a WebSocket's): its text, `prefix` +
    /// the answer + `suffix`, or its refusal (not counted: the owner does that) goes to `done`.
    func enqueue(_ read: DeferredRead, prefix: [UInt8] = [], suffix: [UInt8] = [], for id: UInt64,
                 done: @escaping (Result<[UInt8], EngineError>) -> Void) {
        enqueue(.read(SlicedRead(read, prefix: prefix, suffix: suffix), .handOver(done), waitsFor: nil), for: id)
    }

    private func enqueue(_ item: Item, for id: UInt64) {
        if queues[id] != nil {
            queues[id]!.append(item)
        } else {
            queues[id] = [item]
            turnOrder.append(id)
        }
        if !timer.isScheduled { timer.schedule(afterMicroseconds: 1) }
    }

    /// A message for `id` that must wait behind its read (`holds(id)` is true).
    func hold(_ frames: [OutFrame], reply: Int?, waitsFor: UInt64?, for id: UInt64) {
        queues[id]?.append(.message(frames: frames, reply: reply, waitsFor: waitsFor))
    }

    /// The connection went away: its reads and what waited behind them go nowhere.
    func forget(_ id: UInt64) {
        guard queues.removeValue(forKey: id) != nil else { return }
        turnOrder.removeAll { $0 == id }
    }

    /// One turn's slices: the connections in turn, each a step at a time, until the turn's time is
    /// spent or nothing is left.
    private func runSlice() {
        let started = MonotonicClock.nanoseconds()
        var position = 0
        var elapsed: UInt64 = 0
        while !turnOrder.isEmpty, elapsed < sliceNanoseconds {
            if position >= min(turnOrder.count, Self.concurrentReads) { position = 0 }
            let id = turnOrder[position]
            let before = MonotonicClock.nanoseconds()
            let finished = advance(id)
            let now = MonotonicClock.nanoseconds()
            charge?(id, now - before)
            elapsed = now - started
            if finished {
                turnOrder.remove(at: position)
            } else {
                position += 1
            }
        }
        // Among the connections being served, the next one starts the next turn, so that one big
        // read does not always go first.
        let served = min(turnOrder.count, Self.concurrentReads)
        if position > 0, position < served {
            let head = turnOrder[..<served]
            turnOrder.replaceSubrange(..<served, with: head[position...] + head[..<position])
        }
        if !turnOrder.isEmpty { timer.schedule(afterMicroseconds: Int64(max(1, elapsed / 1_000))) }
    }

    /// One step of `id`'s first read; releases what is ready. True when `id` holds nothing more.
    private func advance(_ id: UInt64) -> Bool {
        guard var items = queues.removeValue(forKey: id), !items.isEmpty else { return true }
        switch items[0] {
        case .read(var read, let answer, let waitsFor):
            items[0] = .message(frames: [], reply: nil, waitsFor: nil)  // keeps `read` unique while it works
            if let outcome = read.step(work: Self.workPerStep) {
                switch (outcome, answer) {
                case (_, .handOver(let done)):
                    done(outcome)  // its owner writes it (an HTTP body, a stream's event)
                case (.success(let text), _) where read.read.limitUse != nil:
                    let (refusal, stored) = admit?(id, read.read) ?? (nil, nil)
                    let after = [waitsFor, stored].compactMap { $0 }.max()
                    items[0] = refusal.map { refused(read.read, answer, $0, waitsFor: after, for: id) }
                        ?? .framing(Framing(text), answer, waitsFor: after)
                case (.success(let text), _):
                    items[0] = .framing(Framing(text), answer, waitsFor: waitsFor)
                case (.failure(let error), _):
                    items[0] = refused(read.read, answer, error, waitsFor: waitsFor, for: id)
                }
            } else {
                items[0] = .read(read, answer, waitsFor: waitsFor)
            }
        case .framing(var framing, let answer, let waitsFor):
            items[0] = .message(frames: [], reply: nil, waitsFor: nil)
            if let frames = framing.step() {
                switch answer {
                case .reply(let number):
                    items[0] = .message(frames: frames, reply: number, waitsFor: waitsFor)
                case .listen(let number, _):
                    // The data leaves at once (a push); the ok after it waits for the step's barrier.
                    items[0] = .message(frames: frames, reply: nil, waitsFor: nil)
                    if let number {
                        let ok = OutboundEncoder.encode(.reply(number: number, result: .success(.emptyObject)))
                        items.insert(.message(frames: OutFrame.frames(for: ok) ?? [], reply: number, waitsFor: waitsFor), at: 1)
                    }
                case .handOver:
                    break  // handed over when its text was done
                }
            } else {
                items[0] = .framing(framing, answer, waitsFor: waitsFor)
            }
        case .message:
            break
        }
        // Everything ready at the front leaves, in order, up to the next read still in slices.
        var ready = 0
        while ready < items.count, case .message(let frames, let reply, let waitsFor) = items[ready] {
            if !frames.isEmpty || reply != nil { release?(id, frames, reply, waitsFor) }
            ready += 1
        }
        if ready == items.count { return true }
        items.removeFirst(ready)
        queues[id] = items
        return false
    }

    /// The refusal of a read found over the budget (or failed otherwise), as the message to send.
    private func refused(_ read: DeferredRead, _ answer: Answer, _ error: EngineError, waitsFor: UInt64?, for id: UInt64) -> Item {
        var refusal = error
        if case .tooBig(let message) = error {
            switch answer {
            case .reply: if let refuse { refusal = refuse(id, message) }
            case .listen(_, let tag): if let refuseListen { refusal = refuseListen(id, read, tag, message) }
            case .handOver: break
            }
        }
        let number = answer.replyNumber
        let message: Outbound = number.map { .reply(number: $0, result: .failure(refusal)) } ?? .serverError(WireStatus.failure(for: refusal).message)
        return .message(frames: OutFrame.frames(for: OutboundEncoder.encode(message)) ?? [], reply: number, waitsFor: waitsFor)
    }

    /// An answer's bytes cut into frames a few at a time (`FrameSplitter`'s pieces, without
    /// copying the whole answer more than once per step).
    struct Framing {
        let bytes: [UInt8]
        private var start = 0
        private var pieces: [OutFrame] = []
        /// Frames made per step: 1 MiB of copying.
        static let piecesPerStep = 64

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        /// The next pieces; the frames of the whole message once the last piece is cut.
        mutating func step() -> [OutFrame]? {
            if bytes.count <= FrameSplitter.maxFrameBytes { return [OutFrame(payload: bytes)] }
            var made = 0
            while start < bytes.count, made < Self.piecesPerStep {
                let end = FrameSplitter.pieceEnd(in: bytes, from: start)
                pieces.append(OutFrame(payload: Array(bytes[start..<end])))
                start = end
                made += 1
            }
            guard start == bytes.count else { return nil }
            guard pieces.count <= FrameSplitter.maxPieces else { return [] }
            return [OutFrame(payload: Array(String(pieces.count).utf8))] + pieces
        }
    }
}
