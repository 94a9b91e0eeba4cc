import CLibWebSockets

/// Every write the shell makes through lws, and the few socket controls, in one place. Each
/// buffer gets `LWS_PRE` bytes of headroom for lws's header. Loop thread only.
enum LWSWrite {
    /// One WebSocket text message. False when lws failed (the connection is then unusable).
    static func text(_ frame: OutFrame, to wsi: OpaquePointer) -> Bool {
        let count = frame.payloadCount
        let written = frame.storage.withUnsafeMutableBufferPointer { buffer in
            lwss_write(wsi, buffer.baseAddress! + OutFrame.headroom, count, Int32(LWS_WRITE_TEXT.rawValue))
        }
        return Int(written) >= count
    }

    /// Frames already framed (`FrameBatch`), in one `send`: a raw write, which lws 4.1 passes
    /// through a WebSocket connection's framing untouched (and buffers, like any write, when the
    /// socket takes only part). False when lws failed.
    static func frames(_ batch: inout FrameBatch, to wsi: OpaquePointer) -> Bool {
        let count = batch.byteCount
        let written = batch.withWire { buffer in
            lwss_write(wsi, buffer.baseAddress! + OutFrame.headroom, count, Int32(LWS_WRITE_HTTP.rawValue) /* LWS_WRITE_RAW */)
        }
        return Int(written) >= count
    }

    /// Whether the connection is a WebSocket inside an HTTP/2 stream (RFC 8441), where lws frames
    /// for the stream and raw bytes cannot go (`frames` is then written one `text` at a time).
    static func isTunnelled(_ wsi: OpaquePointer) -> Bool { lws_get_network_wsi(wsi) != wsi }

    /// A close frame with `code` and `reason`. The shell writes it itself: with the libuv loop,
    /// lws 4.1 kills the socket before sending the frame that `lws_close_reason` queues. The caller
    /// then returns -1 from the callback.
    static func close(code: Int, reason: String, to wsi: OpaquePointer) {
        let payload = [UInt8(truncatingIfNeeded: code >> 8), UInt8(truncatingIfNeeded: code)] + Array(reason.utf8.prefix(120))
        _ = raw(payload, protocol: 4 /* LWS_WRITE_CLOSE, private in 4.1 headers */, to: wsi)
    }

    /// A PING. The payload is not empty on purpose: lws 4.1 does not pass an empty PONG to the
    /// protocol callback (`RECEIVE_PONG`), and the peer echoes the PING's payload in its PONG.
    static func ping(to wsi: OpaquePointer) -> Bool {
        raw(Array("presence".utf8), protocol: Int32(LWS_WRITE_PING.rawValue), to: wsi) >= 0
    }

    /// HTTP body bytes (`final`: the last of the response). False when lws failed.
    static func httpBody(_ bytes: [UInt8], final: Bool, to wsi: OpaquePointer) -> Bool {
        let kind = final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP
        return raw(bytes, protocol: Int32(kind.rawValue), to: wsi) >= bytes.count
    }

    /// An HTTP response head: status, headers (lws adds its security headers), and
    /// `Content-Length` when given (none for a chunked stream). False when lws failed.
    static func httpHead(status: Int, headers: [(String, String)], contentLength: Int?, to wsi: OpaquePointer) -> Bool {
        var buffer = [UInt8](repeating: 0, count: OutFrame.headroom + 2048)
        return buffer.withUnsafeMutableBufferPointer { pointer -> Bool in
            let start = pointer.baseAddress! + OutFrame.headroom
            let end = pointer.baseAddress! + pointer.count
            var cursor: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_header_status(wsi, UInt32(status), &cursor, end) != 0 { return false }
            for (name, value) in headers {
                let key = Array((name.lowercased() + ":").utf8) + [0]
                let bytes = Array(value.utf8)
                if lws_add_http_header_by_name(wsi, key, bytes, Int32(bytes.count), &cursor, end) != 0 { return false }
            }
            if let contentLength,
               lws_add_http_header_content_length(wsi, lws_filepos_t(contentLength), &cursor, end) != 0 { return false }
            return lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
        }
    }

    private static func raw(_ payload: [UInt8], protocol kind: Int32, to wsi: OpaquePointer) -> Int {
        var buffer = [UInt8](repeating: 0, count: OutFrame.headroom) + payload
        let count = payload.count
        return Int(buffer.withUnsafeMutableBufferPointer { pointer in
            lwss_write(wsi, pointer.baseAddress! + OutFrame.headroom, count, kind)
        })
    }

    /// Whether lws still holds part of an earlier write (then nothing may be written through).
    static func isBuffered(_ wsi: OpaquePointer) -> Bool { lws_partial_buffered(wsi) != 0 }

    /// Ask for a WRITEABLE callback.
    static func requestWriteable(_ wsi: OpaquePointer) { lws_callback_on_writable(wsi) }

    /// An HTTP connection whose request is complete and that has nothing to write now: stop
    /// polling its socket for input. lws 4.1 reads nothing more from an HTTP/1 connection until its
    /// response is complete, so bytes a client sends meanwhile (or its leaving) would otherwise
    /// wake the loop again and again.
    static func pauseHTTP(_ wsi: OpaquePointer) { _ = lws_rx_flow_control(wsi, 0) }

    /// Ask for an `HTTP_WRITEABLE` callback. lws 4.1 handles an HTTP/1 connection's writability
    /// only while it is not rx-flow-controlled, so input polling comes back for as long as a write
    /// is pending (`pauseHTTP` again once there is nothing left to write).
    static func requestHTTPWriteable(_ wsi: OpaquePointer) {
        _ = lws_rx_flow_control(wsi, 1)
        lws_callback_on_writable(wsi)
    }

    /// A WebSocket connection over its message budget: lws reads nothing more from it (what it
    /// already read waits in lws) until `resumeReading`; the client is slowed by TCP backpressure.
    static func pauseReading(_ wsi: OpaquePointer) { _ = lws_rx_flow_control(wsi, 0) }

    static func resumeReading(_ wsi: OpaquePointer) { _ = lws_rx_flow_control(wsi, 1) }

    /// Close the socket now, without a close frame; lws then reports the close.
    static func drop(_ wsi: OpaquePointer) { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }

    /// Close the socket after `seconds` unless it closed before (a close frame that cannot be sent).
    static func drop(_ wsi: OpaquePointer, afterSeconds seconds: Int32) { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, seconds) }

    /// No lws timeout (a stream lives until its client goes).
    static func keepOpen(_ wsi: OpaquePointer) { lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0) }
}
