import CLibWebSockets
import PresenceCore
import PresenceWire

/// A REST streaming read: an HTTP response that stays open and carries Server-Sent Events.
final class StreamConnection {
    let id: UInt64
    let wsi: OpaquePointer
    let location: Path
    var queue: [[UInt8]] = []
    var queuedBytes = 0
    var ending = false

    init(id: UInt64, wsi: OpaquePointer, location: Path) {
        self.id = id
        self.wsi = wsi
        self.location = location
    }
}

extension LWSServer {
    /// Starts a stream: the engine checks the read and queues the first `put`; the headers go out now.
    func openStream(_ wsi: OpaquePointer, _ request: StreamRequest) -> Int32 {
        let id = nextConnectionID
        nextConnectionID += 1
        if case .failure(let error) = engine.openStream(ConnectionID(id), path: request.path, namespace: request.namespace,
                                                       credentials: request.credentials, query: request.query, now: now()) {
            return respond(wsi, .error(401, WireStatus.status(for: error).message))
        }
        guard writeStreamHeaders(wsi) else {
            engine.disconnect(ConnectionID(id), now: now())
            return -1
        }
        // A stream lives until the client goes away; lws's HTTP timeout must not end it.
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
        let stream = StreamConnection(id: id, wsi: wsi, location: request.path)
        streams[id] = stream
        streamsByWSI[wsi] = id
        logger.info("stream opened", metadata: ["stream": "\(id)", "path": "\(request.path)", "ns": "\(request.namespace)"])
        flushEngine()
        armKeepAlive()
        return 0
    }

    private func writeStreamHeaders(_ wsi: OpaquePointer) -> Bool {
        var buffer = [UInt8](repeating: 0, count: OutFrame.headroom + 1024)
        return buffer.withUnsafeMutableBufferPointer { pointer -> Bool in
            let start = pointer.baseAddress! + OutFrame.headroom
            let end = pointer.baseAddress! + pointer.count
            var cursor: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_header_status(wsi, 200, &cursor, end) != 0 { return false }
            // Chunked, so every event reaches the client as soon as it is written.
            for (name, value) in [("content-type:", "text/event-stream"), ("cache-control:", "no-cache"),
                                  ("transfer-encoding:", "chunked")] {
                let key = Array(name.utf8) + [0]
                let bytes = Array(value.utf8)
                if lws_add_http_header_by_name(wsi, key, bytes, Int32(bytes.count), &cursor, end) != 0 { return false }
            }
            return lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
        }
    }

    /// One HTTP/1.1 chunk.
    static func chunk(_ text: String) -> [UInt8] {
        let body = Array(text.utf8)
        return Array(String(body.count, radix: 16).utf8) + [13, 10] + body + [13, 10]
    }

    /// The last chunk, sent before a stream ends.
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// Queues engine messages for a stream as events.
    func enqueue(_ message: Outbound, onStream stream: StreamConnection) {
        guard !stream.ending, let (text, ends) = ServerSentEvents.events(for: message, location: stream.location) else { return }
        let bytes = Self.chunk(text)
        stream.queue.append(bytes)
        stream.queuedBytes += bytes.count
        if ends {
            stream.ending = true
            stream.queue.append(Self.lastChunk)
        }
        if stream.queuedBytes > configuration.maxQueuedBytes {
            logger.warning("closing stream \(stream.id): it does not read fast enough")
            stream.queue.removeAll()
            stream.ending = true
        }
        lws_callback_on_writable(stream.wsi)
    }

    /// One event per `HTTP_WRITEABLE`; after a `cancel` or `auth_revoked`, the stream closes.
    func streamWriteable(_ stream: StreamConnection) -> Int32 {
        guard !stream.queue.isEmpty else { return stream.ending ? -1 : 0 }
        let event = stream.queue.removeFirst()
        stream.queuedBytes -= event.count
        var buffer = [UInt8](repeating: 0, count: OutFrame.headroom) + event
        let written = buffer.withUnsafeMutableBufferPointer { pointer in
            lwss_write(stream.wsi, pointer.baseAddress! + OutFrame.headroom, event.count, Int32(LWS_WRITE_HTTP.rawValue))
        }
        if Int(written) < event.count { return -1 }
        if !stream.queue.isEmpty || stream.ending { lws_callback_on_writable(stream.wsi) }
        return 0
    }

    func streamClosed(_ wsi: OpaquePointer) {
        guard let id = streamsByWSI.removeValue(forKey: wsi) else { return }
        streams.removeValue(forKey: id)
        engine.disconnect(ConnectionID(id), now: now())
        logger.info("stream closed", metadata: ["stream": "\(id)"])
        flushEngine()
    }

    /// `keep-alive` events every 30 s while streams are open (one timer for all of them).
    func armKeepAlive() {
        guard let context, keepAliveTimer == nil, !streams.isEmpty else { return }
        let timer = makeTimer()
        keepAliveTimer = timer
        scheduleKeepAlive(context, timer)
    }

    private func scheduleKeepAlive(_ context: OpaquePointer, _ timer: UnsafeMutablePointer<lwss_timer_t>) {
        lws_sul_schedule(context, 0, &timer.pointee.sul, { sul in
            guard let sul else { return }
            let server = LWSServer.owner(of: sul)
            let keepAlive = LWSServer.chunk(ServerSentEvents.keepAlive)
            for stream in server.streams.values where !stream.ending {
                stream.queue.append(keepAlive)
                stream.queuedBytes += keepAlive.count
                lws_callback_on_writable(stream.wsi)
            }
            if let context = server.context, let timer = server.keepAliveTimer {
                lws_sul_schedule(context, 0, &timer.pointee.sul, lwss_timer_from_sul(sul)!.pointee.sul.cb, server.keepAliveMicroseconds)
            }
        }, keepAliveMicroseconds)
    }
}
