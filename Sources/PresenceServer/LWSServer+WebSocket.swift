import CLibWebSockets
import PresenceCore
import PresenceWire

extension LWSServer {
    /// Only `/.ws` upgrades; anything else is refused during the handshake.
    func filterUpgrade(_ wsi: OpaquePointer) -> Int32 {
        let uri = header(wsi, WSI_TOKEN_GET_URI) ?? ""
        if uri == "/.ws" || uri.hasPrefix("/.ws?") || uri.hasPrefix("/.ws/") {
            return admitConnection(wsi) ? 0 : 1
        }
        logger.notice("refused WebSocket upgrade on \(uri): only /.ws is served")
        _ = lws_return_http_status(wsi, 404, "WebSockets are served on /.ws only")
        return 1
    }

    /// The per-address limits: too many live connections, or too many new ones this second, from
    /// one address get 429 at the handshake (logged once per address and second).
    func admitConnection(_ wsi: OpaquePointer) -> Bool {
        let perAddress = configuration.maxConnectionsPerAddress, rate = configuration.maxConnectionRatePerAddress
        guard perAddress > 0 || rate > 0 else { return true }
        let address = clientAddress(wsi)
        let second = now() / 1000
        var recent = connectsThisSecond[address] ?? (second, 0)
        if recent.second != second { recent = (second, 0) }
        recent.count += 1
        connectsThisSecond[address] = recent
        if connectsThisSecond.count > 10_000 { connectsThisSecond = connectsThisSecond.filter { $0.value.second == second } }
        let reason: String?
        if perAddress > 0, connectionsByAddress[address, default: 0] >= perAddress {
            reason = "more than \(perAddress) connections from this address"
        } else if rate > 0, recent.count > rate {
            reason = "more than \(rate) new connections per second from this address"
        } else {
            reason = nil
        }
        guard let reason else { return true }
        if recent.count == max(rate, 1) + 1 || perAddress > 0 && recent.count == 1 {
            logger.notice("refusing connections from \(address): \(reason)")
        }
        _ = lws_return_http_status(wsi, 429, "Too many connections: \(reason)")
        return false
    }

    func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = lwss_hdr_total_length(wsi, Int32(token.rawValue))
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        guard lwss_hdr_copy(wsi, &buffer, Int32(buffer.count), Int32(token.rawValue)) >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func urlArgument(_ wsi: OpaquePointer, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 2048)
        let found: String? = buffer.withUnsafeMutableBufferPointer { pointer in
            guard let value = lws_get_urlarg_by_name(wsi, name + "=", pointer.baseAddress, Int32(pointer.count)) else { return nil }
            return String(cString: value)
        }
        // lws has already decoded %-escapes in the query string.
        return found
    }

    /// The User-Agent header, shared with earlier connections that sent the same one: clients of one
    /// app send a handful of distinct values of ~100 bytes, which would otherwise be stored once per
    /// connection.
    func internedUserAgent(_ wsi: OpaquePointer) -> String? {
        guard let agent = header(wsi, WSI_TOKEN_HTTP_USER_AGENT) else { return nil }
        if let shared = userAgents[agent] { return shared }
        if userAgents.count < 1_000 { userAgents[agent] = agent }
        return agent
    }

    /// The TCP peer's address. The listening socket is dual-stack, so IPv4 clients arrive as
    /// `::ffff:a.b.c.d`: they are reported as plain `a.b.c.d`.
    func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "?" }
        return Self.plainAddress(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    public static func plainAddress(_ address: String) -> String {
        let mapped = "::ffff:"
        guard address.lowercased().hasPrefix(mapped), address.dropFirst(mapped.count).contains(".") else { return address }
        return String(address.dropFirst(mapped.count))
    }

    /// The client's address: the TCP peer, or, when that is a trusted proxy, the nearest address
    /// in `X-Forwarded-For` (read from the right) that is not a trusted proxy itself.
    func clientAddress(_ wsi: OpaquePointer) -> String {
        let peer = peerAddress(wsi)
        guard configuration.trustedProxies.contains(peer), let forwarded = header(wsi, WSI_TOKEN_X_FORWARDED_FOR) else { return peer }
        return Self.client(forwardedFor: forwarded, peer: peer, trusted: configuration.trustedProxies)
    }

    static func client(forwardedFor header: String, peer: String, trusted: Set<String>) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let hops = header.split(separator: ",").map { hop in
            String(hop.drop(while: blank).reversed().drop(while: blank).reversed())
        }.filter { !$0.isEmpty }
        return hops.last { !trusted.contains($0) } ?? hops.first ?? peer
    }

    func established(_ wsi: OpaquePointer, user: UnsafeMutableRawPointer?) {
        let id = nextConnectionID
        nextConnectionID += 1
        user?.storeBytes(of: id, as: UInt64.self)
        let remote = clientAddress(wsi)
        let connection = ShellConnection(id: id, wsi: wsi, remote: remote, userAgent: internedUserAgent(wsi),
                                         now: now(), maxMessageBytes: configuration.maxMessageBytes)
        connections[id] = connection
        connectionsByAddress[remote, default: 0] += 1
        metrics.connectionsOpened.increment()

        let version = urlArgument(wsi, "v")
        let namespace = urlArgument(wsi, "ns")
        let lastSession = urlArgument(wsi, "ls")
        let host = header(wsi, WSI_TOKEN_HOST) ?? "\(configuration.host):\(boundPort)"
        let session = engine.open(ConnectionID(id), namespace: namespace, lastSession: lastSession, host: host, now: now())
        logger.info("connection opened", metadata: [
            "conn": "\(id)", "session": "\(session)", "remote": "\(remote)", "ns": "\(namespace ?? "")",
            "ls": "\(lastSession ?? "")",
        ])
        if let version, version != "5" {
            logger.notice("closing connection \(id): unsupported protocol version v=\(version)")
            perform([.send([ConnectionID(id)], .shutdown(reason: "Unsupported protocol version \(version); this server speaks v=5")),
                     .close(ConnectionID(id), code: 1008, reason: "unsupported protocol version")])
        }
        flushEngine()
    }

    func receive(_ id: UInt64, wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let connection = connections[id], connection.pendingClose == nil else { return 0 }
        if lws_frame_is_binary(wsi) != 0 {
            return refuse(connection, code: 1003, reason: "binary frames are not supported", log: "sent a binary frame")
        }
        let messageEnds = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        connection.lastHeardAt = now()
        connection.bytesIn += length
        totals.bytesIn += length
        metrics.bytesIn.increment(by: length)
        if connection.discardingOversizedMessage || connection.receiveBuffer.count + length > configuration.maxMessageBytes {
            connection.discardingOversizedMessage = true
            connection.receiveBuffer = []
            guard messageEnds else { return 0 }
            return refuse(connection, code: 1009, reason: "message larger than \(configuration.maxMessageBytes) bytes",
                          log: "sent a message over \(configuration.maxMessageBytes) bytes")
        }
        if let input, length > 0 {
            connection.receiveBuffer.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        guard messageEnds else { return 0 }
        let frame = connection.receiveBuffer
        connection.receiveBuffer.removeAll(keepingCapacity: false)
        handleFrame(frame, on: connection)
        return 0
    }

    /// One whole WebSocket message: join count-prefixed pieces, decode, execute, perform effects.
    func handleFrame(_ frame: [UInt8], on connection: ShellConnection) {
        let output: FrameAssembler.Output
        do {
            output = try connection.assembler.accept(frame)
        } catch {
            _ = refuse(connection, code: 1009, reason: error.description, log: "sent a multi-frame \(error)")
            return
        }
        guard case .message(let bytes) = output else { return }
        let id = ConnectionID(connection.id)
        connection.lastFrameAt = now()
        totals.messagesIn += 1
        metrics.messagesIn.increment()
        stepStartedAt = MonotonicClock.nanoseconds()
        defer { stepStartedAt = nil }
        let message: ClientMessage
        do {
            message = try RequestDecoder.decode(bytes)
        } catch {
            _ = refuse(connection, code: 1007, reason: "invalid message: \(error.reason)", log: "sent an undecodable message (\(error.reason))")
            return
        }
        switch message {
        case .ping:
            engine.ping(id)
        case .ignoredControl:
            break
        case .request(let request):
            let isWrite = Self.isWrite(request.request)
            if let number = request.number, isWrite {
                connection.writeStarted[number] = stepStartedAt
            }
            // Only a write's pushes count toward write-to-push (not a listen's initial data).
            if !isWrite { stepStartedAt = nil }
            engine.handle(request, from: id, now: now())
        case let .invalidRequest(number, action, error):
            logger.notice("rejected request", metadata: [
                "conn": "\(connection.id)", "r": "\(number.map(String.init) ?? "-")", "a": "\(action ?? "-")",
                "error": "\(WireStatus.status(for: error).message)",
            ])
            if let number {
                perform([.send([id], .reply(number: number, result: .failure(error)))])
            } else {
                perform([.send([id], .serverError(WireStatus.status(for: error).message))])
            }
        }
        flushEngine()
    }

    static func isWrite(_ request: Request) -> Bool {
        switch request {
        case .put, .merge, .onDisconnectPut, .onDisconnectMerge, .onDisconnectCancel: return true
        default: return false
        }
    }

    /// Tells the client why, then closes; logged once.
    func refuse(_ connection: ShellConnection, code: Int, reason: String, log: String) -> Int32 {
        logger.notice("closing connection \(connection.id) (\(connection.remote)): it \(log)")
        perform([.send([ConnectionID(connection.id)], .serverError(reason)),
                 .close(ConnectionID(connection.id), code: code, reason: reason)])
        return 0
    }

    /// A PONG arrived: the peer is alive.
    func heard(_ id: UInt64) {
        connections[id]?.lastHeardAt = now()
    }

    func writeable(_ id: UInt64) -> Int32 {
        guard let connection = connections[id] else { return -1 }
        if connection.pingDue, connection.pendingClose == nil {
            connection.pingDue = false
            guard writePing(connection.wsi) else { return -1 }
            if connection.hasQueuedFrames { lws_callback_on_writable(connection.wsi) }
            return 0
        }
        if let frame = connection.dequeue() {
            guard frame.write(to: connection.wsi) else { return -1 }
            countSent(frame, on: connection)
            if connection.hasQueuedFrames || connection.pendingClose != nil {
                lws_callback_on_writable(connection.wsi)
            }
            return 0
        }
        if let (code, reason) = connection.pendingClose {
            // Write the close frame ourselves: with the libuv loop, lws 4.1 kills the socket
            // before sending the frame that `lws_close_reason` queues.
            let payload = [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8.prefix(120))
            var buffer = [UInt8](repeating: 0, count: OutFrame.headroom) + payload
            _ = buffer.withUnsafeMutableBufferPointer { pointer in
                lwss_write(connection.wsi, pointer.baseAddress! + OutFrame.headroom, payload.count, 4 /* LWS_WRITE_CLOSE, private in 4.1 headers */)
            }
            return -1
        }
        return 0
    }

    func peerClosing(_ id: UInt64, input: UnsafeMutableRawPointer?, length: Int) {
        guard let connection = connections[id] else { return }
        var code = 1005
        if let input, length >= 2 {
            let bytes = input.assumingMemoryBound(to: UInt8.self)
            code = Int(bytes[0]) << 8 | Int(bytes[1])
        }
        connection.pendingClose = connection.pendingClose ?? (code, "peer closed")
    }

    func closed(_ id: UInt64) {
        guard let connection = connections.removeValue(forKey: id) else { return }
        if let count = connectionsByAddress[connection.remote] {
            if count <= 1 { connectionsByAddress.removeValue(forKey: connection.remote) } else { connectionsByAddress[connection.remote] = count - 1 }
        }
        let reason = connection.pendingClose.map { "\($0.code) \($0.reason)" } ?? "socket closed"
        metrics.closed(reason: connection.pendingClose.map { $0.reason == "peer closed" ? "client_close" : "server_\($0.code)" } ?? "socket_closed")
        engine.disconnect(ConnectionID(id), now: now())
        logger.info("connection closed", metadata: ["conn": "\(id)", "remote": "\(connection.remote)", "reason": "\(reason)"])
        flushEngine()
    }

    /// Performs engine effects in order: encode each message once, queue it for every recipient.
    /// With `barrier`, replies (acks) wait until storage has made that step durable; a connection's
    /// later messages wait behind them, so its order never changes.
    func perform(_ effects: [Effect], barrier: UInt64? = nil) {
        for effect in effects {
            switch effect {
            case let .send(recipients, message):
                let text = OutboundEncoder.encode(message)
                var replyNumber: Int?
                switch message {
                case .data, .merge:
                    totals.pushes += recipients.count
                    metrics.pushes.increment(by: recipients.count)
                    if let started = stepStartedAt {
                        metrics.writeToPush.recordNanoseconds(Int64(MonotonicClock.nanoseconds() - started))
                    }
                case .reply(let number, _):
                    replyNumber = number
                default:
                    break
                }
                guard let pieces = FrameSplitter.frames(for: text) else {
                    logger.error("dropping a message of \(text.utf8.count) bytes: too large to split")
                    continue
                }
                let frames = pieces.map(OutFrame.init(payload:))
                for recipient in recipients {
                    if let stream = streams[recipient.raw] {
                        enqueue(message, onStream: stream)
                        continue
                    }
                    guard let connection = connections[recipient.raw], connection.pendingClose == nil else { continue }
                    var required = connection.held.last?.sequence ?? 0
                    if case .reply = message, let barrier { required = max(required, barrier) }
                    if required > releasedSequence {
                        for frame in frames { connection.held.append((required, frame, replyNumber)) }
                        heldConnections.insert(recipient.raw)
                        continue
                    }
                    // Write-through: with nothing queued and nothing buffered in lws, write now
                    // instead of asking for a WRITEABLE callback. It saves two epoll_ctl calls and a
                    // loop wake-up per message, the main cost of fan-out (lws buffers a short write
                    // itself and asks for WRITEABLE to finish it).
                    var remaining = frames[...]
                    if let replyNumber { ackSent(replyNumber, on: connection) }
                    while !connection.hasQueuedFrames, let frame = remaining.first, lws_partial_buffered(connection.wsi) == 0 {
                        guard frame.write(to: connection.wsi) else { break }
                        countSent(frame, on: connection)
                        remaining = remaining.dropFirst()
                    }
                    if remaining.isEmpty { continue }
                    for frame in remaining { connection.enqueue(frame) }
                    if connection.queuedBytes > configuration.maxQueuedBytes {
                        logger.warning("closing connection \(recipient.raw): it does not read fast enough (\(connection.queuedBytes) bytes queued)")
                        connection.queue.removeAll()
                        connection.queueHead = 0
                        connection.queuedBytes = 0
                        connection.pendingClose = (1008, "too slow: outbound queue over limit")
                    }
                    lws_callback_on_writable(connection.wsi)
                }
            case let .close(id, code, reason):
                guard let connection = connections[id.raw] else { continue }
                connection.pendingClose = (code, reason)
                lws_callback_on_writable(connection.wsi)
            }
        }
    }
}

extension LWSServer {
    func countSent(_ frame: OutFrame, on connection: ShellConnection) {
        connection.bytesOut += frame.payloadCount
        totals.bytesOut += frame.payloadCount
        totals.messagesOut += 1
        metrics.bytesOut.increment(by: frame.payloadCount)
        metrics.messagesOut.increment()
    }

    /// A write's ack is on its way: time it from the request's arrival.
    func ackSent(_ number: Int, on connection: ShellConnection) {
        guard let started = connection.writeStarted.removeValue(forKey: number) else { return }
        // An emptied dictionary keeps its storage: free it (most connections have one write in flight).
        if connection.writeStarted.isEmpty { connection.writeStarted = [:] }
        metrics.writeToAck.recordNanoseconds(Int64(MonotonicClock.nanoseconds() - started))
    }
}
