import Logging
import PresenceCore
import PresenceWire

/// The outbound path, for WebSocket connections: where a push is written, where an ack waits, and
/// where a connection is closed.
///
/// Each engine message is encoded once and its frames shared by every recipient. `DeliveryOrder`
/// decides whether a message may leave now (an ack waits for its step to be durable, and nothing
/// overtakes it). A message that may leave is due (`DueFrames`, no allocation per push); at the end
/// of the loop's turn (`flush`) each connection's due frames go in one `send` (`FrameBatch`) when it
/// has nothing queued and lws nothing buffered, with no WRITEABLE round trip (no `epoll_ctl`): under
/// load a watcher gets several pushes per turn, so the cost per push falls as load rises. What does
/// not fit one send, or finds the socket full, is queued and written a batch per WRITEABLE. A
/// queue over `maxQueuedBytes` drops the connection as a slow reader: it leaves the engine at once
/// (`takeDropped`), and its socket closes within a second even if the close frame cannot be sent.
final class Outbox {
    private let maxQueuedBytes: Int
    private let logger: Logger
    private let metrics: ServerMetrics
    private let table: ConnectionTable
    private let streams: EventStreams
    // Touched for every push and every send on the loop thread, never re-entrantly: no dynamic
    // exclusivity checks (they cost about as much as the rest of a push's bookkeeping).
    @exclusivity(unchecked) private var order = DeliveryOrder<UInt64>()
    @exclusivity(unchecked) private var due = DueFrames<ShellConnection>()
    @exclusivity(unchecked) private var batch = FrameBatch()
    private var dropped: [UInt64] = []
    private var stalled: StalledQueues
    /// lws timeouts were set outside an lws callback (at the turn's end): lws must be woken to arm
    /// them (`LoopRuntime.wake`).
    private(set) var needsLWSWake = false
    private(set) var messagesSent = 0
    private(set) var bytesSent = 0
    private(set) var pushes = 0

    /// Big reads answered in slices; what their connections are sent meanwhile waits behind them.
    let slices: SlicedReplies

    init(maxQueuedBytes: Int, logger: Logger, metrics: ServerMetrics, table: ConnectionTable, streams: EventStreams,
         slices: SlicedReplies, stalledAfterMilliseconds: Int64 = 100) {
        stalled = StalledQueues(stalledAfterMilliseconds: stalledAfterMilliseconds)
        self.maxQueuedBytes = maxQueuedBytes
        self.logger = logger
        self.metrics = metrics
        self.table = table
        self.streams = streams
        self.slices = slices
        slices.release = { [unowned self] id, frames, reply, waitsFor in
            guard let connection = table[id], connection.closing == nil else { return }
            submit(frames, reply: reply, waitsFor: waitsFor, to: connection)
        }
    }

    /// Performs engine effects in order. A reply waits for `barrier` (the sequence of the step's
    /// changes, when storage is on); `writeStartedAt` times write-to-push for a write's pushes.
    func perform(_ effects: [Effect], barrier: UInt64? = nil, writeStartedAt: UInt64? = nil) {
        for effect in effects {
            switch effect {
            case let .send(recipients, message):
                send(message, to: recipients, barrier: barrier, writeStartedAt: writeStartedAt)
            case let .close(id, code, reason):
                guard let connection = table[id.raw] else { continue }
                close(connection, code, reason: reason)
            }
        }
    }

    private func send(_ message: Outbound, to recipients: [ConnectionID], barrier: UInt64?, writeStartedAt: UInt64?) {
        if case .reply(let number, .success(.deferred(let read))) = message {
            for recipient in recipients where table[recipient.raw]?.closing == nil {
                slices.enqueue(read, number: number, waitsFor: barrier, for: recipient.raw)
            }
            return
        }
        if case .listenData(let number, let read, let tag) = message {
            for recipient in recipients {
                if streams.isOpen, streams.enqueueFirst(read, for: recipient.raw) { continue }
                guard table[recipient.raw]?.closing == nil else { continue }
                slices.enqueueListen(read, number: number, tag: tag, waitsFor: barrier, for: recipient.raw)
            }
            return
        }
        let text = OutboundEncoder.encode(message)
        var reply: Int?
        switch message {
        case .data, .merge:
            pushes += recipients.count
            metrics.pushes.increment(by: recipients.count)
            if let writeStartedAt {
                metrics.writeToPush.recordNanoseconds(Int64(MonotonicClock.nanoseconds() - writeStartedAt))
            }
        case .reply(let number, _):
            reply = number
        default:
            break
        }
        guard let frames = OutFrame.frames(for: text) else {
            logger.error("dropping a message of \(text.utf8.count) bytes: too large to split")
            return
        }
        // Only an ack waits for its step to be durable.
        let waitsFor = reply == nil ? nil : barrier
        let anyStreams = streams.isOpen
        if anyStreams { streams.nextMessage() }
        let bytes = frames.reduce(0) { $0 &+ $1.payloadCount }
        for recipient in recipients {
            if anyStreams, streams.enqueue(message, for: recipient.raw) { continue }
            guard let connection = table[recipient.raw], connection.closing == nil else { continue }
            addressedBytes &+= bytes
            if slices.isActive, slices.holds(connection.id) {
                slices.hold(frames, reply: reply, waitsFor: waitsFor, for: connection.id)
                continue
            }
            submit(frames, reply: reply, waitsFor: waitsFor, to: connection)
        }
    }

    /// A message for one connection: due now, or held by the durability barrier.
    private func submit(_ frames: [OutFrame], reply: Int?, waitsFor: UInt64?, to connection: ShellConnection) {
        if order.mayLeave(waitsFor: waitsFor, lane: connection.lane) {
            deliver(frames, reply: reply, to: connection)
        } else {
            order.hold(HeldMessage(frames: frames, reply: reply), waitsFor: waitsFor, to: connection.id, lane: &connection.lane)
        }
    }

    /// Makes the frames due: they leave at the end of the turn (`flush`), after what is queued.
    private func deliver(_ frames: [OutFrame], reply: Int?, to connection: ShellConnection) {
        if let reply { ackSent(reply, on: connection) }
        for frame in frames { due.append(frame, for: connection) }
        // A connection already waiting for its socket is judged now; the others after the flush.
        if !connection.queue.isEmpty, connection.queue.bytes + due.bytes(for: connection) > maxQueuedBytes {
            dropSlowReader(connection)
        }
    }

    /// The end of the loop's turn: each connection's due frames in one send, when nothing is
    /// queued or buffered ahead of them; the rest queued for WRITEABLE.
    func flush() {
        needsLWSWake = false
        guard !due.isEmpty else { return }
        for index in 0..<due.beginTurn() {
            let (connection, frames) = due.turn(index)
            flush(frames, to: connection)
        }
        due.endTurn()
    }

    private func flush(_ frames: DueFrames<ShellConnection>.Chain, to connection: ShellConnection) {
        var frames = frames
        var next = frames.next()
        // Nothing left (taken out since: queued by a WRITEABLE, dropped, closed).
        guard next != nil, connection.closeSentAt == nil else { return }
        let wsi = connection.wsi
        if connection.queue.isEmpty, !LWSWrite.isBuffered(wsi) {
            var written: Bool
            if LWSWrite.isTunnelled(wsi) {
                written = true
                while written, let frame = next {
                    written = LWSWrite.text(frame, to: wsi)
                    if written { countSent(frames: 1, bytes: frame.payloadCount, on: connection) }
                    next = frames.next()
                }
            } else {
                batch.reset()
                while let frame = next, batch.fits(frame) {
                    batch.append(frame)
                    next = frames.next()
                }
                written = writeBatch(to: connection)
            }
            guard written else {
                LWSWrite.drop(wsi)
                needsLWSWake = true
                return
            }
        }
        guard next != nil else { return }
        while let frame = next {
            enqueue(frame, on: connection)
            next = frames.next()
        }
        if connection.queue.exceeds(maxQueuedBytes) { dropSlowReader(connection) } else { LWSWrite.requestWriteable(wsi) }
    }

    /// Writes the batch in one raw send. False when lws failed.
    private func writeBatch(to connection: ShellConnection) -> Bool {
        guard LWSWrite.frames(&batch, to: connection.wsi) else { return false }
        countSent(frames: batch.frameCount, bytes: batch.payloadBytes, on: connection)
        return true
    }

    /// The socket closed: its frames due this turn and its queue go nowhere.
    func closed(_ connection: ShellConnection) {
        _ = due.take(for: connection)
        clearQueue(of: connection)
        if slices.isActive { slices.forget(connection.id) }
    }

    /// Payload bytes queued for sockets, all connections together.
    private(set) var queuedBytes = 0

    /// Payload bytes ever addressed to WebSocket connections, due at once or held behind an ack
    /// (only ever grows): what handling one message queued is the difference (`WriterPushback`
    /// weighs writers by it; the backlog's own difference would also count a slow reader dropped
    /// meanwhile, and miss what is held).
    private(set) var addressedBytes = 0

    /// Payload bytes waiting for sockets: queued, or due this turn (the outbound backlog writers
    /// are pushed back on, `WriterPushback`).
    var backlogBytes: Int { queuedBytes + due.totalBytes }

    /// `backlogBytes` without what waits for stalled sockets (`StalledQueues`): what push-back on
    /// writers can make drain. Worked out only past `threshold` (below it, `backlogBytes` is enough).
    func drainableBacklogBytes(over threshold: Int) -> Int {
        let all = backlogBytes
        guard all > threshold else { return all }
        return all - stalled.stalledBytes(now: WallClock.nowMilliseconds()) { [table] id in table[id]?.queue.bytes ?? 0 }
    }

    private func enqueue(_ frame: OutFrame, on connection: ShellConnection) {
        if connection.queue.isEmpty { stalled.moved(connection.id, now: WallClock.nowMilliseconds()) }
        connection.queue.append(frame)
        queuedBytes += frame.payloadCount
    }

    private func dequeue(from connection: ShellConnection) {
        if let frame = connection.queue.popFirst() { queuedBytes -= frame.payloadCount }
        if connection.queue.isEmpty { stalled.emptied(connection.id) } else { stalled.moved(connection.id, now: WallClock.nowMilliseconds()) }
    }

    private func clearQueue(of connection: ShellConnection) {
        queuedBytes -= connection.queue.bytes
        connection.queue.removeAll()
        stalled.emptied(connection.id)
    }

    /// Storage made every step up to `sequence` durable: release the acks held for them, and what
    /// waited behind them, in order (they leave at the end of the turn).
    func durable(upTo sequence: UInt64) {
        for id in order.markDurable(upTo: sequence) {
            guard let connection = table[id] else { continue }
            for message in order.release(id, lane: &connection.lane) {
                deliver(message.frames, reply: message.reply, to: connection)
            }
        }
    }

    /// Flush what is queued, then send a close frame with `code` and `reason`.
    func close(_ connection: ShellConnection, _ code: CloseCode, reason: String) {
        connection.closing = ShellConnection.Closing(code: code.rawValue, reason: reason)
        LWSWrite.requestWriteable(connection.wsi)
    }

    /// The peer sent a close frame (lws answers it): nothing more is sent, and the close's log line
    /// gives the peer's code.
    func peerClosed(_ connection: ShellConnection, code: Int) {
        if connection.closing == nil { connection.closing = ShellConnection.Closing(code: code, reason: "peer closed") }
        // lws answers the close now: nothing may follow it.
        _ = due.take(for: connection)
    }

    /// Push-back on queued bytes has lasted without the backlog draining: the bytes wait for
    /// sockets that are not read, and writers paused for them would wait forever (readers that
    /// never read, each under `--max-queued-bytes`, can hold the whole backlog). The connections
    /// holding the most are dropped as slow readers until the backlog is back to `target`.
    func dropSlowestReaders(downTo target: Int) {
        guard backlogBytes > target else { return }
        let holding = table.all.filter { $0.queue.bytes > 0 }.sorted { $0.queue.bytes > $1.queue.bytes }
        for connection in holding {
            guard backlogBytes > target else { break }
            dropSlowReader(connection, while: ", while the server is past saturation and they do not drain")
        }
    }

    private func dropSlowReader(_ connection: ShellConnection, while context: String = "") {
        let queued = connection.queue.bytes + due.bytes(for: connection)
        logger.warning("closing connection \(connection.id): it does not read fast enough (\(queued) bytes queued\(context))")
        clearQueue(of: connection)
        _ = due.take(for: connection)
        connection.lane = DeliveryLane()
        dropped.append(connection.id)
        close(connection, .policyViolation, reason: "too slow: outbound queue over limit")
        // Its socket is full, so the close frame may never go out: lws drops it in a second.
        LWSWrite.drop(connection.wsi, afterSeconds: 1)
        needsLWSWake = true
    }

    /// Whether `takeDropped` has something.
    var hasDropped: Bool { !dropped.isEmpty || (streams.isOpen && streams.hasDropped) }

    /// Connections and streams dropped as slow readers since the last call: the engine must forget
    /// them now.
    func takeDropped() -> [UInt64] {
        defer { dropped = [] }
        return streams.isOpen ? dropped + streams.takeDropped() : dropped
    }

    /// `SERVER_WRITEABLE`: a due PING, else the next batch of queued frames, else the close frame.
    func writeable(_ id: UInt64) -> Int32 {
        guard let connection = table[id] else { return -1 }
        // Frames due this turn go behind the queue (the flush would otherwise send them first).
        for frame in due.take(for: connection) { enqueue(frame, on: connection) }
        if connection.pingDue, connection.closing == nil {
            connection.pingDue = false
            guard LWSWrite.ping(to: connection.wsi) else { return -1 }
            if !connection.queue.isEmpty { LWSWrite.requestWriteable(connection.wsi) }
            return 0
        }
        if let first = connection.queue.first {
            if LWSWrite.isTunnelled(connection.wsi) {
                dequeue(from: connection)
                guard LWSWrite.text(first, to: connection.wsi) else { return -1 }
                countSent(frames: 1, bytes: first.payloadCount, on: connection)
            } else {
                batch.reset()
                while let frame = connection.queue.first, batch.fits(frame) {
                    batch.append(frame)
                    dequeue(from: connection)
                }
                guard writeBatch(to: connection) else { return -1 }
            }
            if !connection.queue.isEmpty || connection.closing != nil { LWSWrite.requestWriteable(connection.wsi) }
            return 0
        }
        if connection.closing != nil {
            guard connection.closeSentAt == nil else { return 0 }
            return closeNow(connection, code: connection.closing!.code, reason: connection.closing!.reason)
        }
        return 0
    }

    /// How long a connection the server closed may take to answer with its close frame.
    static let closeLingerMilliseconds: Int64 = 2_000

    /// Writes the close frame now (nothing queued is sent after it). A closing handshake: the
    /// connection stays open, its input read and discarded, until the client answers with its
    /// close (`WebSocketRoute.peerClosing` ends it) or the liveness sweep drops it after
    /// `closeLingerMilliseconds`. Closing at once would reset a socket the client is still writing
    /// to, and the reset can swallow the close frame before the client reads why. Shutdown
    /// (1001) does not linger: the context goes right after. Returns what WRITEABLE returns.
    @discardableResult
    func closeNow(_ connection: ShellConnection, code: Int, reason: String) -> Int32 {
        if connection.closing == nil { connection.closing = ShellConnection.Closing(code: code, reason: reason) }
        clearQueue(of: connection)
        _ = due.take(for: connection)
        LWSWrite.close(code: code, reason: reason, to: connection.wsi)
        connection.closing?.sentAt = WallClock.nowMilliseconds()
        // Read again if its budget had paused it (InboundThrottle): its close must be able to arrive.
        LWSWrite.resumeReading(connection.wsi)
        return code == CloseCode.goingAway.rawValue ? -1 : 0
    }

    /// A PING for a silent connection (liveness): now if nothing is ahead of it, else after the queue.
    func ping(_ connection: ShellConnection) {
        if connection.queue.isEmpty, !due.holdsFrames(for: connection), !LWSWrite.isBuffered(connection.wsi) {
            if !LWSWrite.ping(to: connection.wsi) { LWSWrite.drop(connection.wsi) }
        } else {
            connection.pingDue = true
            LWSWrite.requestWriteable(connection.wsi)
        }
    }

    /// Times write-to-ack for write request `number` from `startedAt` (monotonic ns).
    func expectAck(_ number: Int, on connection: ShellConnection, startedAt: UInt64) {
        connection.writeStarted[number] = startedAt
    }

    private func ackSent(_ number: Int, on connection: ShellConnection) {
        guard let started = connection.writeStarted.removeValue(forKey: number) else { return }
        // An emptied dictionary keeps its storage: free it (most connections have one write in flight).
        if connection.writeStarted.isEmpty { connection.writeStarted = [:] }
        metrics.writeToAck.recordNanoseconds(Int64(MonotonicClock.nanoseconds() - started))
    }

    private func countSent(frames: Int, bytes: Int, on connection: ShellConnection) {
        connection.bytesOut += bytes
        bytesSent += bytes
        messagesSent += frames
        metrics.bytesOut.increment(by: bytes)
        metrics.messagesOut.increment(by: frames)
        metrics.socketWrites.increment()
    }
}
