import CLibWebSockets

/// The one lws callback, a global function so it converts to `@convention(c)`: it finds its
/// server through the context's user pointer and hands each event to the part that owns it.
/// Per-session data holds the connection's id (a `UInt64`), never a pointer.
func presenceCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let raw = lws_context_user(lws_get_context(wsi)) else { return 0 }
    let server = Unmanaged<LWSServer>.fromOpaque(raw).takeUnretainedValue()
    switch reason {
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
        if let governor = server.acceptGovernor, !governor.admit(Int32(truncatingIfNeeded: Int(bitPattern: input))) { return 1 }
        MaskTap.accepted(input)
        return 0
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return server.webSocket.filterUpgrade(wsi)
    case LWS_CALLBACK_ESTABLISHED:
        server.webSocket.established(wsi, user: user)
        return 0
    case LWS_CALLBACK_RECEIVE:
        guard let user else { return -1 }
        return server.webSocket.receive(user.load(as: UInt64.self), wsi: wsi, input: input, length: length)
    case LWS_CALLBACK_RECEIVE_PONG:
        if let user { server.webSocket.heard(user.load(as: UInt64.self)) }
        return 0
    case LWS_CALLBACK_SERVER_WRITEABLE:
        guard let user else { return -1 }
        return server.outbox.writeable(user.load(as: UInt64.self))
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        guard let user else { return 0 }
        return server.webSocket.peerClosing(user.load(as: UInt64.self), input: input, length: length)
    case LWS_CALLBACK_CLOSED:
        if let user { server.webSocket.closed(user.load(as: UInt64.self)) }
        return 0
    case LWS_CALLBACK_HTTP:
        return server.http.request(wsi, uri: input)
    case LWS_CALLBACK_HTTP_BODY:
        return server.http.body(wsi, input: input, length: length)
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return server.http.bodyComplete(wsi)
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return server.http.writeable(wsi)
    case LWS_CALLBACK_CLOSED_HTTP:
        server.http.closed(wsi)
        return 0
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        server.runtime.serviceWake()
        server.woken()
        return 0
    default:
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
}
