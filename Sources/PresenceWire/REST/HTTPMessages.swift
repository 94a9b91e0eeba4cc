import PresenceCore

/// An HTTP request as the shell hands it over: everything decoded, nothing socket-specific.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path, percent-decoded, without the query.
    public var path: String
    /// Query parameters, percent-decoded (`+` is a space).
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: String

    public init(status: Int, headers: [(String, String)] = [], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.map { "\($0.0):\($0.1)" } == b.headers.map { "\($0.0):\($0.1)" }
    }

    public static func json(_ status: Int, _ body: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: body)
    }

    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        var body = "{\"error\":"
        JSONWriter.writeString(message, into: &body)
        body += "}"
        return .json(status, body)
    }
}

/// A request refused before it reaches the engine, with the response to send.
public struct HTTPRefusal: Error, Sendable {
    public var response: HTTPResponse
    public init(_ response: HTTPResponse) { self.response = response }
}

/// Percent-decoding for URL paths and query values.
public enum URLDecoding {
    public static func percentDecode(_ text: some StringProtocol, plusIsSpace: Bool = false) -> String {
        guard text.contains("%") || (plusIsSpace && text.contains("+")) else { return String(text) }
        var bytes: [UInt8] = []
        let utf8 = Array(text.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%"), index + 2 < utf8.count,
               let value = UInt8(String(decoding: utf8[index + 1...index + 2], as: UTF8.self), radix: 16) {
                bytes.append(value)
                index += 3
            } else {
                bytes.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `a=1&b=%22x%22` into a dictionary (the last value wins).
    public static func queryItems(_ query: some StringProtocol) -> [String: String] {
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = percentDecode(parts[0], plusIsSpace: true)
            items[key] = parts.count > 1 ? percentDecode(parts[1], plusIsSpace: true) : ""
        }
        return items
    }
}
