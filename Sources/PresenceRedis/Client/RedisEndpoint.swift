#if canImport(Glibc)
import Glibc
#endif

/// Where Redis listens: a numeric IPv4 or IPv6 address and a port. Names are refused on purpose:
/// hiredis resolves them with a blocking getaddrinfo on the calling thread, which is the event loop.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case notNumeric(String)
        case badPort(String)

        public var description: String {
            switch self {
            case .malformed(let text): "expected HOST:PORT or [IPv6]:PORT, got \"\(text)\""
            case .notNumeric(let host):
                "\"\(host)\" is not a numeric IP address (names would be resolved on the event loop, which blocks it)"
            case .badPort(let port): "\"\(port)\" is not a port (1-65535)"
            }
        }
    }

    public init(host: String, port: Int) throws(ParseError) {
        guard RedisEndpoint.isNumericAddress(host) else { throw .notNumeric(host) }
        guard (1...65535).contains(port) else { throw .badPort(String(port)) }
        self.host = host
        self.port = port
    }

    /// Parses `127.0.0.1:6379` or `[::1]:6379`.
    public init(parsing text: String) throws(ParseError) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                  text[text.index(after: close)...].hasPrefix(":") else { throw .malformed(text) }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else {
                throw .malformed(text)
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw .malformed(text) }
        guard let port = Int(portText) else { throw .badPort(String(portText)) }
        try self.init(host: String(host), port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static func isNumericAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
