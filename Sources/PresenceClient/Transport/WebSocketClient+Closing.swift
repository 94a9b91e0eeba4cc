import CLibWebSockets
import Glibc
import PresenceCore

/// Ending connections: clean closes (queue flushed, close frame, the peer's reply), aborts
/// without a close frame, and what is still open or waiting when the loop ends.
extension WebSocketClient {
    func beginClose(_ socket: ClientSocket, code: CloseCode) {
        guard !socket.closing, !socket.aborted else { return }
        socket.closing = true
        socket.closeCode = code
        guard let wsi = socket.wsi else { return }
        if socket.established {
            if !socket.paused { lws_callback_on_writable(wsi) }
        } else {
            // Still handshaking: nothing to close cleanly; drop it.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    func abortSocket(_ socket: ClientSocket, mode: WebSocketAbortMode) {
        guard !socket.aborted, let wsi = socket.wsi else { return }
        socket.aborted = true
        socket.dropQueue()
        let fd = lws_get_socket_fd(wsi)
        if fd >= 0 {
            switch mode {
            case .fin:
                Glibc.shutdown(fd, Int32(SHUT_RDWR))
            case .reset:
                var lingerOption = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerOption, socklen_t(MemoryLayout<linger>.size))
            }
        }
        // NOSTATUS close: lws sends no close frame (rops_close_via_role_protocol_ws).
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }

    /// Starts queued close handshakes, at most `maxHandshakesInFlight` at a time: each one
    /// inserts lws timeout timers with a linear sorted walk, so thousands at once cost O(n^2).
    func pumpCloses() {
        while closeNowHead < closeNow.count, closingInFlight < configuration.maxHandshakesInFlight {
            let id = closeNow[closeNowHead]
            closeNowHead += 1
            if let socket = sockets[id] { startCloseHandshake(socket) }
        }
        if closeNowHead == closeNow.count {
            closeNow.removeAll(keepingCapacity: closeNow.count < 4096)
            closeNowHead = 0
        }
    }

    /// The close frame starts on the next wake-up, outside this connection's callback.
    func scheduleCloseHandshake(_ socket: ClientSocket) {
        closeNow.append(socket.id)
        runtime.wake()
    }

    /// Sends the close frame via lws's polite close path. Must run outside this wsi's callbacks.
    ///
    /// Returning -1 from `CLIENT_WRITEABLE` after `lws_close_reason` does NOT send a close frame
    /// with Debian's lws 4.1.6 + libuv: its `_DEBUG` build calls close a second time ("uv repeat
    /// test" in service.c), which finds the wsi in WAITING_TO_SEND_CLOSE and kills the socket.
    /// `LWS_TO_KILL_SYNC` closes with NOSTATUS without marking the socket unusable, so lws queues
    /// the close frame, sends it on POLLOUT and waits up to 5 s for the peer's reply.
    private func startCloseHandshake(_ socket: ClientSocket) {
        guard let wsi = socket.wsi, socket.established, !socket.aborted, !socket.closeCounted else { return }
        socket.closeCounted = true
        closingInFlight += 1
        lws_close_reason(wsi, lws_close_status(UInt32(socket.closeCode.rawValue)), nil, 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
    }

    func finishClosed(_ wsi: OpaquePointer) {
        guard let socket = socket(of: wsi) else { return }
        sockets[socket.id] = nil
        counters.closed.wrappingAdd(1, ordering: .relaxed)
        if socket.closeCounted {
            closingInFlight -= 1
            if closeNowHead < closeNow.count, !isStopping { runtime.wake() }  // pump on the next wake-up
        }
        handler(self, .closed(socket.id, closeInfo(socket, byShutdown: isStopping)))
    }

    private func closeInfo(_ socket: ClientSocket, byShutdown: Bool) -> WebSocketCloseInfo {
        WebSocketCloseInfo(closedLocally: socket.closing, aborted: socket.aborted, peerCloseCode: socket.peerCloseCode,
                           peerCloseReason: socket.peerCloseReason,
                           byShutdown: byShutdown, messageTooLarge: socket.messageTooLarge)
    }

    /// After the context is gone: connects that never started fail, and any connection lws did
    /// not report closed (there should be none) is reported now.
    func reportUnfinished() {
        failAllPending(reason: "client shutting down")
        pending.removeAll()
        pendingHead = 0
        for socket in sockets.values {
            if socket.established {
                counters.closed.wrappingAdd(1, ordering: .relaxed)
                handler(self, .closed(socket.id, closeInfo(socket, byShutdown: true)))
            } else {
                failConnect(socket.id, reason: "client shutting down")
            }
        }
        sockets.removeAll()
        tickTimer = nil
    }
}
