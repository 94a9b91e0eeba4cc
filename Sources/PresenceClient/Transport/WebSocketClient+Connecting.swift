import CLibWebSockets

/// Opening connections: a FIFO of connects, at most `maxHandshakesInFlight` handshakes at a time
/// (each one inserts lws timeout timers with a linear sorted walk, so thousands at once cost
/// O(n^2)).
extension WebSocketClient {
    func pumpConnects() {
        while inFlight < configuration.maxHandshakesInFlight, pendingHead < pending.count, !isStopping {
            let next = pending[pendingHead]
            pendingHead += 1
            startConnect(next)
        }
        compactPending()
    }

    func compactPending() {
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: pending.count < 4096)
            pendingHead = 0
        } else if pendingHead > 4096, pendingHead * 2 > pending.count {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
    }

    func removePending(_ id: WebSocketConnectionID) {
        guard let index = pending[pendingHead...].firstIndex(where: { $0.id == id }) else { return }
        pending.remove(at: index)
        failConnect(id, reason: "closed before connecting")
    }

    /// Fails every connect that has not started.
    func failAllPending(reason: String) {
        while pendingHead < pending.count {
            let next = pending[pendingHead]
            pendingHead += 1
            failConnect(next.id, reason: reason)
        }
        compactPending()
    }

    func failConnect(_ id: WebSocketConnectionID, reason: String) {
        counters.connectFailures.wrappingAdd(1, ordering: .relaxed)
        handler(self, .connectFailed(id, reason: reason))
    }

    /// A handshake that ended before the connection was established (error or destroyed); the
    /// next connect starts unless `pump` is false (inside ``pumpConnects()`` itself).
    func handshakeEnded(_ socket: ClientSocket, reason: String, pump: Bool = true) {
        sockets[socket.id] = nil
        inFlight -= 1
        failConnect(socket.id, reason: reason)
        if pump, !isStopping { pumpConnects() }
    }

    private func startConnect(_ next: PendingConnect) {
        guard let context = runtime.context else { failConnect(next.id, reason: "no context"); return }
        let socket = ClientSocket(id: next.id)
        sockets[next.id] = socket
        inFlight += 1
        var info = lws_client_connect_info()
        info.context = context
        info.port = Int32(next.url.port)
        info.ietf_version_or_minus_one = -1
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: UInt(next.id))
        info.retry_and_idle_policy = retryPolicy
        if next.url.secure {
            var flags = Int32(LCCSCF_USE_SSL.rawValue)
            if configuration.insecureSkipVerify {
                flags |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue) | Int32(LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue)
                    | Int32(LCCSCF_ALLOW_EXPIRED.rawValue) | Int32(LCCSCF_ALLOW_INSECURE.rawValue)
            }
            info.ssl_connection = flags
        }
        // lws copies every string into its own stash during lws_client_connect_via_info.
        let wsi: OpaquePointer? = next.url.host.withCString { host in
            next.url.pathAndQuery.withCString { path in
                next.url.hostHeader.withCString { hostHeader in
                    withOptionalCString(configuration.origin) { origin in
                        withOptionalCString(next.sourceAddress) { iface in
                            info.address = host
                            info.path = path
                            info.host = hostHeader
                            info.origin = origin ?? hostHeader
                            info.iface = iface
                            // Sec-WebSocket-Protocol when configured (MQTT brokers need `mqtt`).
                            return withOptionalCString(configuration.subprotocol) { subprotocol in
                                info.protocol = subprotocol
                                if subprotocol != nil { info.local_protocol_name = localProtocolName }
                                return lws_client_connect_via_info(&info)
                            }
                        }
                    }
                }
            }
        }
        if let wsi {
            if sockets[next.id] === socket { socket.wsi = wsi }
        } else if sockets[next.id] === socket {
            // Failed synchronously without a CONNECTION_ERROR callback.
            handshakeEnded(socket, reason: "lws_client_connect_via_info failed", pump: false)
        }
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
