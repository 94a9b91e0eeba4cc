import CLibWebSockets

/// Liveness in the shell instead of lws's per-connection validity timers.
///
/// lws 4.1 keeps one validity timer per connection and re-inserts it into a sorted linked list on
/// every establish and every PONG: O(connections) each, which showed up as the first lws symbol in
/// churn profiles (`lws_dll2_add_sorted`). Here lws gets a zeroed retry policy (no validity timers)
/// and one timer walks the connections a few times per ping interval instead:
///
/// - a connection heard from (any frame, fragment or PONG) less than `--ping-interval` s ago is left
///   alone;
/// - after `--ping-interval` s of silence it gets one PING (as lws would send);
/// - after `--idle-timeout` s of silence it is dropped without a close frame (as lws's hang-up), and
///   `CLOSED` runs its onDisconnect ops as for any other drop.
///
/// Detection is the idle timeout plus at most one sweep period (a quarter of the ping interval,
/// 250 ms to 1 s).
extension LWSServer {
    var livenessSweepMilliseconds: Int64 {
        min(1_000, max(250, Int64(configuration.pingIntervalSeconds) * 1_000 / 4))
    }

    func startLivenessSweep() {
        guard let context else { return }
        if livenessTimer == nil { livenessTimer = makeTimer() }
        lws_sul_schedule(context, 0, &livenessTimer!.pointee.sul, { sul in
            guard let sul else { return }
            let server = LWSServer.owner(of: sul)
            server.sweepLiveness()
            server.startLivenessSweep()
        }, livenessSweepMilliseconds * 1_000)
    }

    func sweepLiveness() {
        let now = now()
        let pingAfter = Int64(configuration.pingIntervalSeconds) * 1_000
        let hangUpAfter = Int64(configuration.idleTimeoutSeconds) * 1_000
        for connection in connections.values where !connection.hungUp {
            let quiet = now - connection.lastHeardAt
            if quiet >= hangUpAfter {
                connection.hungUp = true
                logger.info("connection \(connection.id) (\(connection.remote)) silent for \(quiet) ms: dropping it")
                lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            } else if quiet >= pingAfter, connection.pingSentAt <= connection.lastHeardAt, connection.pendingClose == nil {
                connection.pingSentAt = now
                if !connection.hasQueuedFrames, lws_partial_buffered(connection.wsi) == 0 {
                    if !writePing(connection.wsi) { lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
                } else {
                    connection.pingDue = true
                    lws_callback_on_writable(connection.wsi)
                }
            }
        }
    }

    /// Writes a PING frame. False when lws failed. The payload is not empty on purpose: lws 4.1
    /// does not pass an empty PONG to the protocol callback (`RECEIVE_PONG`), and the peer echoes
    /// the PING's payload in its PONG.
    func writePing(_ wsi: OpaquePointer) -> Bool {
        var buffer = [UInt8](repeating: 0, count: OutFrame.headroom) + Array("presence".utf8)
        let count = buffer.count - OutFrame.headroom
        let written = buffer.withUnsafeMutableBufferPointer { pointer in
            lwss_write(wsi, pointer.baseAddress! + OutFrame.headroom, count, Int32(LWS_WRITE_PING.rawValue))
        }
        return written >= 0
    }
}
