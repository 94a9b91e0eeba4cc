import CLibWebSockets
import PresenceWire

#if canImport(Glibc)
import Glibc
#endif

/// Everything the shell reads from an lws connection handle: headers, URL arguments, the peer's
/// address, the state of the frame being received, and a whole HTTP request. Loop thread only.
enum LWSRead {
    static func header(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = lwss_hdr_total_length(wsi, Int32(token.rawValue))
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        guard lwss_hdr_copy(wsi, &buffer, Int32(buffer.count), Int32(token.rawValue)) >= 0 else { return nil }
        return string(buffer.prefix(Int(length)))
    }

    /// A header lws has no token for (`name` lowercased, without the colon).
    static func customHeader(_ wsi: OpaquePointer, _ name: String) -> String? {
        let key = name + ":"
        let length = lws_hdr_custom_length(wsi, key, Int32(key.utf8.count))
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        guard lws_hdr_custom_copy(wsi, &buffer, Int32(buffer.count), key, Int32(key.utf8.count)) >= 0 else { return nil }
        return string(buffer.prefix(Int(length)))
    }

    /// A query-string argument, %-decoded by lws.
    static func urlArgument(_ wsi: OpaquePointer, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 2048)
        return buffer.withUnsafeMutableBufferPointer { pointer in
            guard let value = lws_get_urlarg_by_name(wsi, name + "=", pointer.baseAddress, Int32(pointer.count)) else { return nil }
            return String(cString: value)
        }
    }

    /// The TCP peer's address (IPv4 as plain `a.b.c.d`).
    static func peerAddress(_ wsi: OpaquePointer) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "?" }
        return ClientAddress.plain(string(buffer.prefix { $0 != 0 }))
    }

    /// The client's address, through `X-Forwarded-For` when the peer is a trusted proxy.
    static func clientAddress(_ wsi: OpaquePointer, trustedProxies: Set<String>) -> String {
        let peer = peerAddress(wsi)
        guard trustedProxies.contains(peer) else { return peer }
        return ClientAddress.resolve(peer: peer, forwardedFor: header(wsi, WSI_TOKEN_X_FORWARDED_FOR), trusted: trustedProxies)
    }

    /// Whether the peer of a connection that should be silent (a stream, whose reading is off)
    /// closed or sent something: a non-blocking peek at its socket.
    static func peerLeftOrSpoke(_ wsi: OpaquePointer) -> Bool {
        let fd = lws_get_socket_fd(wsi)
        guard fd >= 0 else { return true }
        var byte: UInt8 = 0
        let result = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return result >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    static func isBinaryFrame(_ wsi: OpaquePointer) -> Bool { lws_frame_is_binary(wsi) != 0 }

    /// Whether the fragment just received is the last of its WebSocket message.
    static func messageEnds(_ wsi: OpaquePointer) -> Bool {
        lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
    }

    /// Payload bytes of the frame being received that are still to come (from its header).
    static func remainingInFrame(_ wsi: OpaquePointer) -> Int { Int(clamping: lws_remaining_packet_payload(wsi)) }

    /// The HTTP request lws has parsed: method, path, query and the headers the routes read.
    static func request(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?) -> HTTPRequest {
        var method = "GET"
        for (token, name) in [(WSI_TOKEN_POST_URI, "POST"), (WSI_TOKEN_PUT_URI, "PUT"), (WSI_TOKEN_PATCH_URI, "PATCH"),
                              (WSI_TOKEN_DELETE_URI, "DELETE"), (WSI_TOKEN_OPTIONS_URI, "OPTIONS")]
        where lwss_hdr_total_length(wsi, Int32(token.rawValue)) > 0 {
            method = name
        }
        let path = uri.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
        var query: [String: String] = [:]
        var fragment: Int32 = 0
        var buffer = [CChar](repeating: 0, count: 8192)
        while true {
            let count = lwss_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), Int32(WSI_TOKEN_HTTP_URI_ARGS.rawValue), fragment)
            if count < 0 { break }
            let item = string(buffer.prefix(Int(count)))
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if let name = parts.first { query[String(name)] = parts.count > 1 ? String(parts[1]) : "" }
            fragment += 1
        }
        var headers: [String: String] = [:]
        for (token, name) in [(WSI_TOKEN_HTTP_AUTHORIZATION, "authorization"), (WSI_TOKEN_HTTP_ACCEPT, "accept"),
                              (WSI_TOKEN_HTTP_IF_MATCH, "if-match"), (WSI_TOKEN_HTTP_IF_NONE_MATCH, "if-none-match"),
                              (WSI_TOKEN_HTTP_CONTENT_LENGTH, "content-length"), (WSI_TOKEN_HTTP_USER_AGENT, "user-agent")] {
            if let value = header(wsi, token) { headers[name] = value }
        }
        for name in ["x-http-method-override", "x-firebase-etag"] {
            if let value = customHeader(wsi, name) { headers[name] = value }
        }
        return HTTPRequest(method: method, path: path, query: query, headers: headers)
    }

    private static func string<C: Collection>(_ chars: C) -> String where C.Element == CChar {
        String(decoding: chars.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
