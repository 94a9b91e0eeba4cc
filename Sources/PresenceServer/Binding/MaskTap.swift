import CLibWebSockets
import CPresenceTap

/// Whether a client's frames were masked, which lws 4.1.6 checks nowhere and does not expose
/// (RFC 6455 §5.1: a server must close the connection on an unmasked frame), and the frames lws
/// drops the connection for without a close frame. `CPresenceTap` follows the frame headers in the
/// bytes lws reads; this is the shell's side of it. Loop thread only.
enum MaskTap {
    /// `LWS_CALLBACK_FILTER_NETWORK_CONNECTION`: lws passes the accepted socket as `in`.
    static func accepted(_ input: UnsafeMutableRawPointer?) {
        accepted(socket: Int32(truncatingIfNeeded: Int(bitPattern: input)))
    }

    /// A connection accepted on `socket` (also one handed to lws later, `AcceptGovernor`).
    static func accepted(socket: Int32) { presence_tap_accepted(socket) }

    /// The connection on `wsi` is a WebSocket now, known to the server as `id`; returns its socket.
    static func established(_ wsi: OpaquePointer, id: UInt64) -> Int32 {
        let socket = lws_get_socket_fd(wsi)
        presence_tap_set_owner(socket, id)
        presence_tap_established(socket)
        return socket
    }

    /// The id of the WebSocket connection on `socket` (the tap's handler knows sockets, not ids;
    /// the tap keeps a slot per descriptor anyway, so no table of our own): 0 for none.
    static func owner(_ socket: Int32) -> UInt64 { presence_tap_owner(socket) }

    static func sawUnmaskedFrame(_ socket: Int32) -> Bool { presence_tap_unmasked(socket) != 0 }

    /// The close code and reason for a frame on `socket` that lws would drop silently, if any.
    static func violation(_ socket: Int32) -> (code: Int, reason: String)? {
        var why: UnsafePointer<CChar>?
        let code = presence_tap_violation(socket, &why)
        guard code != 0 else { return nil }
        return (Int(code), why.map { String(cString: $0) } ?? "protocol error")
    }

    /// `handler(context, socket)` runs inside lws's read of `socket`, before lws parses what it read,
    /// the first time a frame on it is one lws would drop the connection for without a close frame.
    static func onViolation(_ handler: @escaping @convention(c) (UnsafeMutableRawPointer?, Int32) -> Void,
                            context: UnsafeMutableRawPointer) {
        presence_tap_on_violation(handler, context)
    }

    static func closed(_ socket: Int32) { presence_tap_forget(socket) }

    static func closed(_ wsi: OpaquePointer) { presence_tap_forget(lws_get_socket_fd(wsi)) }
}
