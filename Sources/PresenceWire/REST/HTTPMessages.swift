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
