import CLibWebSockets
import PresenceCore

/// The one lws callback, a global function so it converts to `@convention(c)`. It finds its
/// server through the context's user pointer and forwards to methods on the loop thread.
func presenceCallback(
    _ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
) -> Int32 {
    guard let wsi, let raw = lws_context_user(lws_get_context(wsi)) else { return 0 }
    let server = Unmanaged<LWSServer>.fromOpaque(raw).takeUnretainedValue()
    switch reason {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return server.filterUpgrade(wsi)
    case LWS_CALLBACK_ESTABLISHED:
        server.established(wsi, user: user)
        return 0
    case LWS_CALLBACK_RECEIVE:
        guard let user else { return -1 }
        return server.receive(user.load(as: UInt64.self), wsi: wsi, input: input, length: length)
    case LWS_CALLBACK_RECEIVE_PONG:
        if let user { server.heard(user.load(as: UInt64.self)) }
        return 0
    case LWS_CALLBACK_SERVER_WRITEABLE:
        guard let user else { return -1 }
        return server.writeable(user.load(as: UInt64.self))
    case LWS_CALLBACK_CLOSED:
        if let user { server.closed(user.load(as: UInt64.self)) }
        return 0
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if let user { server.peerClosing(user.load(as: UInt64.self), input: input, length: length) }
        return 0
    case LWS_CALLBACK_HTTP:
        return server.http(wsi, uri: input, length: length)
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return server.httpWriteable(wsi)
    case LWS_CALLBACK_HTTP_BODY:
        return server.httpBody(wsi, input: input, length: length)
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return server.httpBodyComplete(wsi)
    case LWS_CALLBACK_CLOSED_HTTP:
        server.httpResponses.removeValue(forKey: wsi)
        server.pendingRequests.removeValue(forKey: wsi)
        server.streamClosed(wsi)
        return 0
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        if stopRequested.load(ordering: .relaxed) { server.beginShutdown() }
        server.reloadIfRequested()
        server.releaseDurable()
        return 0
    default:
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
}
