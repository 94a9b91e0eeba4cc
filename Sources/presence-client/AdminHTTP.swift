import PresenceClient
import PresenceCore

#if canImport(Glibc)
import Glibc
#endif

/// A small blocking HTTP/1.1 client: one request per connection (`Connection: close`).
enum AdminHTTP {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// True when no connection could be made (exit 2); false for a failure after connecting (exit 3).
        var isConnect: Bool
    }

    static let timeoutSeconds = 10

    /// `?a=b&c=d` with each part percent-encoded, or "" for none.
    static func query(_ items: [(String, String)]) -> String {
        items.isEmpty ? "" : "?" + items.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    /// Percent-encodes a path segment or query part (RFC 3986 unreserved characters stay).
    static func escape(_ text: String) -> String { RESTEndpoint.percentEncoded(text) }

    static func request(_ endpoint: AdminEndpoint, method: String, target: String, token: String,
                        body: String?) throws(Failure) -> Reply {
        let fd = try connect(endpoint)
        defer { close(fd) }
        let hostHeader = endpoint.host.contains(":") ? "[\(endpoint.host)]:\(endpoint.port)" : "\(endpoint.host):\(endpoint.port)"
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nAuthorization: Bearer \(token)\r\n"
        head += "Accept: application/json\r\nUser-Agent: presence-client/\(PresenceClientVersion.current)\r\nConnection: close\r\n"
        let payload = Array((body ?? "").utf8)
        if body != nil || method == "POST" {
            head += "Content-Type: application/json\r\nContent-Length: \(payload.count)\r\n"
        }
        let bytes = Array((head + "\r\n").utf8) + payload
        try send(fd, bytes)
        return try receive(fd)
    }

    private static func connect(_ endpoint: AdminEndpoint) throws(Failure) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard status == 0, let first = list else {
            throw Failure(description: "cannot resolve \(endpoint.host): \(String(cString: gai_strerror(status)))",
                          isConnect: true)
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = 0
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if fd < 0 { lastError = errno; continue }
            var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return fd }
            lastError = errno
            close(fd)
        }
        let reason = lastError == ECONNREFUSED ? "connection refused" : String(cString: strerror(lastError))
        throw Failure(description: "cannot connect to \(endpoint.host):\(endpoint.port): \(reason)", isConnect: true)
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "sending the request failed: \(String(cString: strerror(errno)))", isConnect: false)
            }
            offset += n
        }
    }

    private static func receive(_ fd: Int32) throws(Failure) -> Reply {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        var headerEnd: Int?
        var reply: Reply?
        var contentLength: Int?
        while true {
            if let end = headerEnd, let length = contentLength, data.count - end >= length { break }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                let reason = errno == EAGAIN || errno == EWOULDBLOCK
                    ? "no answer within \(timeoutSeconds)s" : String(cString: strerror(errno))
                throw Failure(description: "reading the answer failed: \(reason)", isConnect: false)
            }
            if n == 0 { break }
            data += buffer[0..<n]
            if headerEnd == nil, let end = find([13, 10, 13, 10], in: data) {
                headerEnd = end + 4
                reply = try parseHead(Array(data[0..<end]))
                contentLength = reply?.headers["content-length"].flatMap { Int($0.trimmingWhitespace()) }
            }
        }
        guard let end = headerEnd, var reply else {
            throw Failure(description: data.isEmpty ? "the server closed the connection without answering"
                                                    : "the server's answer is not HTTP", isConnect: false)
        }
        var body = Array(data[end...])
        if let contentLength {
            guard body.count >= contentLength else {
                throw Failure(description: "the answer was cut short (\(body.count) of \(contentLength) bytes)", isConnect: false)
            }
            body = Array(body.prefix(contentLength))
        } else if reply.headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try dechunk(body)
        }
        reply.body = body
        return reply
    }

    private static func parseHead(_ bytes: [UInt8]) throws(Failure) -> Reply {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusParts = lines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/"), let status = Int(statusParts[1]) else {
            throw Failure(description: "the server's answer is not HTTP", isConnect: false)
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...]).trimmingWhitespace()
        }
        return Reply(status: status, headers: headers, body: [])
    }

    private static func dechunk(_ data: [UInt8]) throws(Failure) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < data.count {
            guard let lineEnd = find([13, 10], in: data, from: i) else { break }
            let sizeText = String(decoding: data[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(), radix: 16) else {
                throw Failure(description: "bad chunked encoding in the answer", isConnect: false)
            }
            if size == 0 { break }
            let start = lineEnd + 2
            guard start + size <= data.count else {
                throw Failure(description: "the answer was cut short", isConnect: false)
            }
            out += data[start..<start + size]
            i = start + size + 2
        }
        return out
    }

    private static func find(_ needle: [UInt8], in data: [UInt8], from start: Int = 0) -> Int? {
        guard data.count >= needle.count, start <= data.count - needle.count else { return nil }
        for i in start...(data.count - needle.count) where data[i] == needle[0] {
            if Array(data[i..<i + needle.count]) == needle { return i }
        }
        return nil
    }
}

extension Substring {
    func trimmingCharacters() -> String { String(self).trimmingWhitespace() }
}
