/// Where the admin API lives: the host and port of `--server`.
struct AdminEndpoint: Sendable, Equatable {
    var host: String
    var port: UInt16

    /// Accepts `ws://host:port`, `http://host:port`, `host:port`, `[::1]:port` (a path is ignored; the port
    /// defaults to 80). TLS schemes are refused: this client speaks plain HTTP.
    init?(_ text: String) {
        var rest = Substring(text)
        if let range = rest.range(of: "://") {
            let scheme = rest[..<range.lowerBound].lowercased()
            guard scheme == "ws" || scheme == "http" else { return nil }
            rest = rest[range.upperBound...]
        }
        if let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) { rest = rest[..<slash] }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { return nil }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(where: { $0 == "@" || $0.isWhitespace }) else { return nil }
        var port: UInt16 = 80
        if let portText {
            guard let p = UInt16(portText), p > 0 else { return nil }
            port = p
        }
        self.host = String(host)
        self.port = port
    }
}
