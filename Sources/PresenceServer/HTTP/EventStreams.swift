import Logging
import PresenceCore
import PresenceLoop
import PresenceWire

/// The open REST streaming reads (`Accept: text/event-stream`, §9.4): HTTP responses that stay
/// open and carry Server-Sent Events as HTTP/1.1 chunks, one per `HTTP_WRITEABLE` (at most
/// `HTTPResponder.pieceBytes` of one per WRITEABLE), with a `keep-alive` event every
/// `--stream-keep-alive` seconds. The HTTP route opens them (the engine checks the read); the
/// outbound path hands them their engine messages.
///
/// The head goes out at the first WRITEABLE. A first event over `--slice-reads-over` (the engine
/// hands it over as a big listen's data) is made in slices by `SlicedReplies` before it: later
/// events wait behind it, in order, and a first event past `--max-read-bytes` is answered 413
/// instead of the stream (`refuse`).
final class EventStreams {
    private final class Stream {
        let id: UInt64
        let wsi: OpaquePointer
        let location: Path
        var queue: [ArraySlice<UInt8>] = []
        var queuedBytes = 0
        var ending = false
        var headWritten = false
        /// Its first event is being made in slices: nothing is written before it.
        var firstPending = false

        init(id: UInt64, wsi: OpaquePointer, location: Path) {
            self.id = id
            self.wsi = wsi
            self.location = location
        }
    }

    private var streams: [UInt64: Stream] = [:]
    /// The current message's events by location, so streams of one location share one copy of
    /// its bytes (arrays are copy-on-write) instead of serializing it once each.
    private var eventsOfMessage: [Path: (chunk: [UInt8], ends: Bool)] = [:]
    /// Streams dropped as slow readers since the last `takeDropped`: the engine must forget them.
    private var dropped: [UInt64] = []
    private var byWSI: [OpaquePointer: UInt64] = [:]
    private let maxQueuedBytes: Int
    private let keepAliveMicroseconds: Int64
    private let logger: Logger
    private var keepAliveTimer: LoopTimer?
    private let runtime: LoopRuntime
    private let slices: SlicedReplies
    /// A stream's first event came out over the read budget (or failed): it is no stream any
    /// more; the owner answers `wsi` with the refusal and makes the engine forget `id`.
    var refuse: ((_ id: UInt64, _ wsi: OpaquePointer, DeferredRead, EngineError) -> Void)?

    init(configuration: ServerConfiguration, logger: Logger, runtime: LoopRuntime, slices: SlicedReplies) {
        maxQueuedBytes = configuration.maxQueuedBytes
        keepAliveMicroseconds = Int64(configuration.streamKeepAliveSeconds) * 1_000_000
        self.logger = logger
        self.runtime = runtime
        self.slices = slices
    }

    var isOpen: Bool { !streams.isEmpty }
    var count: Int { streams.count }

    /// Registers the stream; its head goes out at its first WRITEABLE (after its first event, if
    /// that is made in slices).
    func begin(id: UInt64, wsi: OpaquePointer, location: Path) {
        // A stream lives until the client goes away: no lws timeout, and its socket is polled for
        // input only while an event waits to be written (`checkPeers` notices a client leaving).
        LWSWrite.keepOpen(wsi)
        streams[id] = Stream(id: id, wsi: wsi, location: location)
        byWSI[wsi] = id
        LWSWrite.requestHTTPWriteable(wsi)
        armKeepAlive()
    }

    /// A stream's first event too big to make at once: made in slices, the stream's other events
    /// wait behind it. False when `id` is not a stream.
    func enqueueFirst(_ read: DeferredRead, for id: UInt64) -> Bool {
        guard let stream = streams[id] else { return false }
        guard !stream.ending else { return true }
        stream.firstPending = true
        let (prefix, suffix) = ServerSentEvents.dataEnvelope(path: read.path, location: stream.location)
        slices.enqueue(read, prefix: prefix, suffix: suffix, for: id) { [unowned self] outcome in
            guard let stream = streams[id] else { return }
            stream.firstPending = false
            switch outcome {
            case .success(let event):
                // A chunk without copying the event: its size line, the event, its end.
                let head = Self.chunkHead(event.count)
                stream.queue.insert(contentsOf: [head[...], event[...], [13, 10]], at: 0)
                stream.queuedBytes += head.count + event.count + 2
                LWSWrite.requestHTTPWriteable(stream.wsi)
            case .failure(let error):
                streams.removeValue(forKey: id)
                byWSI.removeValue(forKey: stream.wsi)
                refuse?(id, stream.wsi, read, error)
            }
        }
        return true
    }

    /// Call before handing a new message to its recipients (`enqueue` for each): until then,
    /// `enqueue` reuses the events it made for the current message.
    func nextMessage() {
        if !eventsOfMessage.isEmpty { eventsOfMessage.removeAll(keepingCapacity: true) }
    }

    /// Queues an engine message for stream `id` as events; false when `id` is not a stream.
    func enqueue(_ message: Outbound, for id: UInt64) -> Bool {
        guard let stream = streams[id] else { return false }
        guard !stream.ending else { return true }
        let events: (chunk: [UInt8], ends: Bool)
        if let known = eventsOfMessage[stream.location] {
            events = known
        } else {
            guard let (text, ends) = ServerSentEvents.events(for: message, location: stream.location) else { return true }
            events = (Self.chunk(text), ends)
            eventsOfMessage[stream.location] = events
        }
        let ends = events.ends
        append(events.chunk, to: stream)
        if ends {
            stream.ending = true
            stream.queue.append(Self.lastChunk[...])
        }
        if stream.queuedBytes > maxQueuedBytes {
            logger.warning("closing stream \(stream.id): it does not read fast enough (\(stream.queuedBytes) bytes queued)")
            stream.queue.removeAll()
            stream.queuedBytes = 0
            stream.ending = true
            if stream.firstPending { slices.forget(stream.id) }
            // It leaves the engine now (no more pushes computed for it), and its socket, full,
            // is dropped in a second if the last chunk cannot be written.
            dropped.append(stream.id)
            LWSWrite.drop(stream.wsi, afterSeconds: 1)
        }
        if !stream.firstPending { LWSWrite.requestHTTPWriteable(stream.wsi) }
        return true
    }

    private func append(_ bytes: [UInt8], to stream: Stream) {
        stream.queue.append(bytes[...])
        stream.queuedBytes += bytes.count
    }

    /// `HTTP_WRITEABLE` for a stream: one event; after the last, the stream closes. Nil when `wsi`
    /// is not a stream.
    func writeable(_ wsi: OpaquePointer) -> Int32? {
        guard let id = byWSI[wsi], let stream = streams[id] else { return nil }
        if stream.ending, stream.queue.isEmpty { return -1 }
        if stream.firstPending {
            LWSWrite.pauseHTTP(wsi)
            return 0
        }
        if !stream.headWritten {
            // Chunked, so every event reaches the client as soon as it is written.
            let head = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("transfer-encoding", "chunked")]
            guard LWSWrite.httpHead(status: 200, headers: head, contentLength: nil, to: wsi) else { return -1 }
            stream.headWritten = true
            if !stream.queue.isEmpty || stream.ending { LWSWrite.requestHTTPWriteable(wsi) } else { LWSWrite.pauseHTTP(wsi) }
            return 0
        }
        guard !stream.queue.isEmpty else {
            LWSWrite.pauseHTTP(wsi)
            return 0
        }
        // At most a piece of a big event per WRITEABLE; the rest stays first in the queue.
        let front = stream.queue[0]
        let event = front.prefix(HTTPResponder.pieceBytes)
        if event.count == front.count { stream.queue.removeFirst() } else { stream.queue[0] = front.dropFirst(event.count) }
        stream.queuedBytes -= event.count
        guard LWSWrite.httpBody(Array(event), final: false, to: wsi) else { return -1 }
        // While lws holds part of the write, polling must stay on to flush it: paused, its rest would
        // wait for the next event or keep-alive (a big first event written at once: 30 s).
        if !stream.queue.isEmpty || stream.ending || LWSWrite.isBuffered(wsi) {
            LWSWrite.requestHTTPWriteable(wsi)
        } else {
            LWSWrite.pauseHTTP(wsi)
        }
        return 0
    }

    var hasDropped: Bool { !dropped.isEmpty }

    func takeDropped() -> [UInt64] {
        defer { dropped = [] }
        return dropped
    }

    /// The stream's socket closed: its id, for the engine to forget; nil when it was no stream.
    func closed(_ wsi: OpaquePointer) -> UInt64? {
        guard let id = byWSI.removeValue(forKey: wsi) else { return nil }
        if streams.removeValue(forKey: id)?.firstPending == true { slices.forget(id) }
        return id
    }

    /// Liveness: a stream's client sends nothing after its request, so a readable socket means it
    /// left (or misbehaves): end the stream.
    func checkPeers() {
        for stream in streams.values where !stream.ending && LWSRead.peerLeftOrSpoke(stream.wsi) {
            stream.ending = true
            if stream.firstPending {
                stream.firstPending = false
                slices.forget(stream.id)
            }
            stream.queue.removeAll()
            stream.queuedBytes = 0
            LWSWrite.requestHTTPWriteable(stream.wsi)
        }
    }

    /// `keep-alive` events while streams are open (one timer for all of them).
    private func armKeepAlive() {
        if keepAliveTimer == nil {
            keepAliveTimer = runtime.makeTimer { [unowned self] in
                let keepAlive = Self.chunk(ServerSentEvents.keepAlive)
                for stream in streams.values where !stream.ending {
                    append(keepAlive, to: stream)
                    if !stream.firstPending { LWSWrite.requestHTTPWriteable(stream.wsi) }
                }
                keepAliveTimer?.schedule(afterMicroseconds: keepAliveMicroseconds)
            }
        }
        if keepAliveTimer?.isScheduled == false { keepAliveTimer?.schedule(afterMicroseconds: keepAliveMicroseconds) }
    }

    /// One HTTP/1.1 chunk.
    static func chunk(_ text: String) -> [UInt8] { chunk(Array(text.utf8)) }

    static func chunk(_ body: [UInt8]) -> [UInt8] { chunkHead(body.count) + body + [13, 10] }

    /// A chunk's size line.
    static func chunkHead(_ count: Int) -> [UInt8] { Array(String(count, radix: 16).utf8) + [13, 10] }

    /// The last chunk, sent before a stream ends.
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
}
