import CLibWebSockets
import PresenceCore

/// What lws reports about the client's connections (service thread): the handshake's headers and
/// outcome, received fragments, the chance to write, the peer's close.
extension WebSocketClient {
    func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            appendHandshakeHeaders(input, length)
            return 0
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            return established(wsi)
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            if let socket = socket(of: wsi), !socket.established {
                handshakeEnded(socket, reason: input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error")
            }
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            return receive(wsi, input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return writeable(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            if let socket = socket(of: wsi) { peerClosing(socket, input, length) }
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            finishClosed(wsi)
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            // Safety net: anything still attached to this wsi is reported now.
            if let socket = socket(of: wsi), socket.wsi == nil || socket.wsi == wsi {
                if socket.established {
                    finishClosed(wsi)
                } else {
                    handshakeEnded(socket, reason: isStopping ? "client shutting down" : "destroyed during handshake")
                }
            }
            return 0
        default:
            return 0
        }
    }

    func socket(of wsi: OpaquePointer) -> ClientSocket? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return sockets[WebSocketConnectionID(UInt(bitPattern: raw))]
    }

    /// The peer's close frame: its code (1005 when it has none) and reason (at most 123 bytes).
    private func peerClosing(_ socket: ClientSocket, _ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard let input, length >= 2 else {
            socket.peerCloseCode = UInt16(CloseCode.noStatus.rawValue)
            return
        }
        let bytes = UnsafeRawBufferPointer(start: input, count: min(length, 125))
        socket.peerCloseCode = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        socket.peerCloseReason = String(decoding: bytes.dropFirst(2), as: UTF8.self)
    }

    /// `User-Agent` (when configured): lws hands over `char **p` into its header buffer and the
    /// room left.
    private func appendHandshakeHeaders(_ input: UnsafeMutableRawPointer?, _ room: Int) {
        guard let header = userAgentHeader, let input, header.count < room else { return }
        let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<CChar>.self)
        header.withUnsafeBytes { UnsafeMutableRawPointer(cursor.pointee).copyMemory(from: $0.baseAddress!, byteCount: header.count) }
        cursor.pointee += header.count
    }

    private func established(_ wsi: OpaquePointer) -> Int32 {
        guard let socket = socket(of: wsi) else { return -1 }
        socket.wsi = wsi
        socket.established = true
        inFlight -= 1
        counters.connected.wrappingAdd(1, ordering: .relaxed)
        handler(self, .connected(socket.id))
        if socket.closing || socket.hasQueuedFrames { lws_callback_on_writable(wsi) }
        pumpConnects()
        return 0
    }

    /// Joins fragments into messages of at most `maxMessageBytes`. A larger message is not
    /// buffered: the rest of it is dropped and the connection closed with 1009 (message too big).
    private func receive(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let socket = socket(of: wsi) else { return -1 }
        if socket.messageTooLarge { return 0 }  // closing: nothing more is read into memory
        let final = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        if socket.rx.count + length > configuration.maxMessageBytes {
            socket.messageTooLarge = true
            socket.rx = []
            beginClose(socket, code: .messageTooBig)
            return 0
        }
        if socket.rx.isEmpty {
            socket.rxBinary = lws_frame_is_binary(wsi) != 0
            if final {
                deliver(socket, UnsafeRawBufferPointer(start: input, count: length))
                return 0
            }
        }
        if let input, length > 0 {
            socket.rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        if final {
            let message = socket.rx
            socket.rx = []
            message.withUnsafeBytes { deliver(socket, $0) }
        }
        return 0
    }

    private func deliver(_ socket: ClientSocket, _ bytes: UnsafeRawBufferPointer) {
        counters.messagesReceived.wrappingAdd(1, ordering: .relaxed)
        counters.bytesReceived.wrappingAdd(bytes.count, ordering: .relaxed)
        handler(self, .message(socket.id, WebSocketMessage(bytes: bytes, isBinary: socket.rxBinary)))
    }

    /// One queued frame per `CLIENT_WRITEABLE`; with the queue empty, a pending close starts.
    private func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let socket = socket(of: wsi) else { return -1 }
        if socket.aborted || socket.paused { return 0 }
        if let frame = socket.dequeue() {
            if write(wsi, frame) < 0 { return -1 }
            if socket.hasQueuedFrames || (socket.closing && !socket.closeStarted) { lws_callback_on_writable(wsi) }
            return 0
        }
        if socket.closing, !socket.closeStarted {
            socket.closeStarted = true
            scheduleCloseHandshake(socket)
        }
        return 0
    }

    /// Copies the frame into the scratch buffer (lws masks in place) and writes it.
    private func write(_ wsi: OpaquePointer, _ frame: QueuedFrame) -> Int32 {
        let count = frame.range.count
        if pre + count > scratchCapacity {
            scratch.deallocate()
            scratchCapacity = max(pre + count, scratchCapacity * 2)
            scratch = .allocate(capacity: scratchCapacity)
        }
        frame.bytes.withUnsafeBufferPointer { source in
            if count > 0 { (scratch + pre).update(from: source.baseAddress! + frame.range.lowerBound, count: count) }
        }
        let written = lwss_write(wsi, scratch + pre, count, frame.flags)
        if written < count { return -1 }
        if frame.lastOfMessage { counters.messagesSent.wrappingAdd(1, ordering: .relaxed) }
        counters.bytesSent.wrappingAdd(count, ordering: .relaxed)
        return 0
    }
}
