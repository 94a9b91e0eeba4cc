/// A `ws://` or `wss://` (TLS) `host:port/path?query` address.
public struct WebSocketURL: Sendable, Hashable, CustomStringConvertible {
    /// `wss://`: connect over TLS.
    public var secure = false
    /// Host name or IPv4 literal to connect to, e.g. `127.0.0.1`.
    public var host: String
    /// TCP port; 80 when the URL has none.
    public var port: Int
    /// Path plus optional query, always starting with `/`, e.g. `/.ws?v=5&ns=demo`.
    public var pathAndQuery: String

    public init(host: String, port: Int, pathAndQuery: String = "/") {
        self.host = host
        self.port = port
        self.pathAndQuery = pathAndQuery.hasPrefix("/") ? pathAndQuery : "/" + pathAndQuery
    }

    /// Parses `ws[s]://host[:port][/path][?query]`. Returns nil for other schemes.
    public init?(_ string: String) {
        let secure = string.hasPrefix("wss://")
        guard secure || string.hasPrefix("ws://") else { return nil }
        let rest = string.dropFirst(secure ? 6 : 5)
        let hostPortEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let hostPort = rest[rest.startIndex..<hostPortEnd]
        var tail = String(rest[hostPortEnd...])
        if tail.isEmpty { tail = "/" } else if tail.hasPrefix("?") { tail = "/" + tail }
        var host = String(hostPort)
        var port = secure ? 443 : 80
        if let colon = hostPort.lastIndex(of: ":") {
            guard let p = Int(hostPort[hostPort.index(after: colon)...]), p > 0, p < 65536 else { return nil }
            port = p
            host = String(hostPort[hostPort.startIndex..<colon])
        }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port, pathAndQuery: tail)
        self.secure = secure
    }

    /// `host:port`, the value sent as the `Host` header.
    public var hostHeader: String { "\(host):\(port)" }

    /// The same server with another path and query.
    public func with(pathAndQuery: String) -> WebSocketURL {
        var url = WebSocketURL(host: host, port: port, pathAndQuery: pathAndQuery)
        url.secure = secure
        return url
    }

    public var description: String { "\(secure ? "wss" : "ws")://\(host):\(port)\(pathAndQuery)" }
}
