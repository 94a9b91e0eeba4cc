import CLibWebSockets
import PresenceCore

/// A response waiting for `HTTP_WRITEABLE`, body with `LWS_PRE` headroom.
struct HTTPResponse {
    var body: [UInt8]
    var bodyCount: Int
}

extension LWSServer {
    /// Plain HTTP on the same port. Routes grow with the REST and operator issues.
    func http(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        let path = uri.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
        switch path {
        case "/healthz":
            return respond(wsi, status: 200, contentType: "application/json", body: "{\"status\":\"ok\"}")
        default:
            return respond(wsi, status: 404, contentType: "application/json",
                           body: "{\"error\":\"Not found: this server serves the Realtime Database protocol on /.ws\"}")
        }
    }

    func respond(_ wsi: OpaquePointer, status: Int, contentType: String, body: String) -> Int32 {
        let payload = Array(body.utf8)
        var headers = [UInt8](repeating: 0, count: OutFrame.headroom + 1024)
        let ok = headers.withUnsafeMutableBufferPointer { buffer -> Bool in
            let start = buffer.baseAddress! + OutFrame.headroom
            let end = buffer.baseAddress! + buffer.count
            var cursor: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_common_headers(wsi, UInt32(status), contentType, lws_filepos_t(payload.count), &cursor, end) != 0 {
                return false
            }
            if lws_finalize_write_http_header(wsi, start, &cursor, end) != 0 { return false }
            return true
        }
        guard ok else { return 1 }
        var storage = [UInt8](repeating: 0, count: OutFrame.headroom + payload.count)
        storage.replaceSubrange(OutFrame.headroom..., with: payload)
        httpResponses[wsi] = HTTPResponse(body: storage, bodyCount: payload.count)
        lws_callback_on_writable(wsi)
        return 0
    }

    func httpWriteable(_ wsi: OpaquePointer) -> Int32 {
        guard var response = httpResponses.removeValue(forKey: wsi) else { return 0 }
        let count = response.bodyCount
        let written = response.body.withUnsafeMutableBufferPointer { buffer in
            lwss_write(wsi, buffer.baseAddress! + OutFrame.headroom, count, Int32(LWS_WRITE_HTTP_FINAL.rawValue))
        }
        if Int(written) < count { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }
}
