import CLibWebSockets
import PresenceCore
import PresenceWire

/// A response waiting for `HTTP_WRITEABLE`: headers go out in one writeable, the body in the next,
/// and neither before storage has made `sequence` durable (a write's response is its ack).
struct PendingHTTPResponse {
    var response: HTTPResponse
    var sequence: UInt64
    var headersWritten = false
}

/// A request whose body is still arriving.
struct PendingHTTPRequest {
    var request: HTTPRequest
    var tooLarge = false
}

extension LWSServer {
    /// Plain HTTP on the same port: health, then the REST API.
    func http(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        let request = readRequest(wsi, uri: uri)
        let hasBody = ["PUT", "PATCH", "POST"].contains(request.method) && (Int(request.headers["content-length"] ?? "") ?? 0) > 0
        if !hasBody, let response = operatorRoute(request) {
            let barrier = flushEngine()
            return respond(wsi, response, after: barrier)
        }
        switch rest.stream(request, now: now()) {
        case .success(let stream)?: return openStream(wsi, stream)
        case .failure(let refusal)?: return respond(wsi, refusal.response)
        case nil: break
        }
        if hasBody {
            pendingRequests[wsi] = PendingHTTPRequest(request: request)
            return 0
        }
        let response = rest.handle(request, now: now())
        let barrier = flushEngine()
        return respond(wsi, response, after: barrier)
    }

    func httpBody(_ wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard var pending = pendingRequests[wsi], let input else { return 0 }
        if pending.request.body.count + length > configuration.maxMessageBytes {
            pending.tooLarge = true
            pending.request.body = []
        } else if !pending.tooLarge {
            pending.request.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        pendingRequests[wsi] = pending
        return 0
    }

    func httpBodyComplete(_ wsi: OpaquePointer) -> Int32 {
        guard let pending = pendingRequests.removeValue(forKey: wsi) else { return 0 }
        if pending.tooLarge {
            logger.notice("refused a REST body over \(configuration.maxMessageBytes) bytes")
            return respond(wsi, .error(413, "Request body larger than \(configuration.maxMessageBytes) bytes"))
        }
        let response = operatorRoute(pending.request) ?? rest.handle(pending.request, now: now())
        let barrier = flushEngine()
        return respond(wsi, response, after: barrier)
    }

    func readRequest(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?) -> HTTPRequest {
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
            let item = String(decoding: buffer.prefix(Int(count)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
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

    func customHeader(_ wsi: OpaquePointer, _ name: String) -> String? {
        let key = name + ":"
        let length = lws_hdr_custom_length(wsi, key, Int32(key.utf8.count))
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        guard lws_hdr_custom_copy(wsi, &buffer, Int32(buffer.count), key, Int32(key.utf8.count)) >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Queues a response; it is written once storage has made step `after` durable.
    func respond(_ wsi: OpaquePointer, _ response: HTTPResponse, after sequence: UInt64? = nil) -> Int32 {
        httpResponses[wsi] = PendingHTTPResponse(response: response, sequence: sequence ?? 0)
        if (sequence ?? 0) <= releasedSequence { lws_callback_on_writable(wsi) }
        return 0
    }

    func httpWriteable(_ wsi: OpaquePointer) -> Int32 {
        if let id = streamsByWSI[wsi], let stream = streams[id] { return streamWriteable(stream) }
        guard var pending = httpResponses[wsi], pending.sequence <= releasedSequence else { return 0 }
        let payload = Array(pending.response.body.utf8)
        if !pending.headersWritten {
            guard writeHeaders(wsi, pending.response, contentLength: payload.count) else { return -1 }
            pending.headersWritten = true
            httpResponses[wsi] = pending
            lws_callback_on_writable(wsi)
            return 0
        }
        httpResponses.removeValue(forKey: wsi)
        var storage = [UInt8](repeating: 0, count: OutFrame.headroom) + payload
        let written = storage.withUnsafeMutableBufferPointer { buffer in
            lwss_write(wsi, buffer.baseAddress! + OutFrame.headroom, payload.count, Int32(LWS_WRITE_HTTP_FINAL.rawValue))
        }
        if Int(written) < payload.count { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    private func writeHeaders(_ wsi: OpaquePointer, _ response: HTTPResponse, contentLength: Int) -> Bool {
        var headers = [UInt8](repeating: 0, count: OutFrame.headroom + 2048)
        return headers.withUnsafeMutableBufferPointer { buffer -> Bool in
            let start = buffer.baseAddress! + OutFrame.headroom
            let end = buffer.baseAddress! + buffer.count
            var cursor: UnsafeMutablePointer<UInt8>? = start
            if lws_add_http_header_status(wsi, UInt32(response.status), &cursor, end) != 0 { return false }
            for (name, value) in response.headers {
                let key = Array((name.lowercased() + ":").utf8) + [0]
                let bytes = Array(value.utf8)
                if lws_add_http_header_by_name(wsi, key, bytes, Int32(bytes.count), &cursor, end) != 0 { return false }
            }
            if lws_add_http_header_content_length(wsi, lws_filepos_t(contentLength), &cursor, end) != 0 { return false }
            return lws_finalize_write_http_header(wsi, start, &cursor, end) == 0
        }
    }
}
