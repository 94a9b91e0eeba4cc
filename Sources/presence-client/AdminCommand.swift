import ArgumentParser
import PresenceCore
import PresenceClient

#if canImport(Glibc)
import Glibc
#endif

/// `presence-client admin`: the operator's view of a running server, through its admin HTTP API
/// (`/.admin/…` on the WebSocket port).
struct AdminCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Inspect a running server and close connections through its admin HTTP API.",
        discussion: """
            The admin API shares the server's port: --server takes ws://host:port or http://host:port (or host:port). \
            The credential is the server's admin credential, sent as a Bearer header: --admin-token, --admin-token-file, \
            or by default owner (the emulator's admin). Tables by default; --json prints the server's JSON.

            Exit codes: 0 ok, 2 cannot connect, 3 request failed (for example no such session), 4 credential refused, \
            64 bad arguments.

            Examples:
              presence-client admin connections
              presence-client admin connections --ns demo --uid alice
              presence-client admin user alice --server ws://127.0.0.1:9000
              presence-client admin kick 4f9a1c2e --reason "maintenance"
              presence-client admin stats --json
              presence-client admin stats --server http://10.0.0.5:9000 \\
                  --admin-token-file admin.txt
            """,
        subcommands: [AdminConnectionsCommand.self, AdminUserCommand.self, AdminKickCommand.self, AdminResetLimitCommand.self,
                      AdminStatsCommand.self]
    )
}

/// `--server`, the admin credential and `--json`, shared by the admin subcommands.
struct AdminOptions: ParsableArguments {
    @Option(help: "The server: ws://host:port or http://host:port (the admin API is on the WebSocket port).")
    var server = "ws://127.0.0.1:9000"

    @Option(help: "The admin credential (default: owner, the emulator's admin).")
    var adminToken: String?

    @Option(help: "A file holding the admin credential.")
    var adminTokenFile: String?

    @Flag(help: "Print the server's JSON instead of a table.")
    var json = false

    func validate() throws {
        _ = try endpoint()
        if adminToken != nil, adminTokenFile != nil {
            throw ValidationError("use only one of --admin-token and --admin-token-file")
        }
        if let adminToken, adminToken.isEmpty { throw ValidationError("--admin-token is empty") }
        _ = try credential()
    }

    func endpoint() throws -> AdminEndpoint {
        let lower = server.lowercased()
        if lower.hasPrefix("wss://") || lower.hasPrefix("https://") {
            throw ValidationError("--server: TLS is not supported here; use ws:// or http:// (got \(server))")
        }
        guard let endpoint = AdminEndpoint(server) else {
            throw ValidationError("--server must look like ws://host:port or http://host:port (got \(server))")
        }
        return endpoint
    }

    func credential() throws -> String {
        if let adminToken { return adminToken }
        if let adminTokenFile {
            guard let data = FileBytes.read(adminTokenFile) else {
                throw ValidationError("cannot read --admin-token-file \(adminTokenFile)")
            }
            let text = String(decoding: data, as: UTF8.self).trimmingWhitespace()
            guard !text.isEmpty else { throw ValidationError("--admin-token-file \(adminTokenFile) is empty") }
            return text
        }
        return "owner"
    }

    /// Performs one request; on failure prints the error and throws the matching exit code.
    func call(_ method: String, _ target: String, body: JSON? = nil) throws -> JSON {
        let console = Console()
        let endpoint = try endpoint()
        let token = try credential()
        let reply: AdminHTTP.Reply
        do {
            reply = try AdminHTTP.request(endpoint, method: method, target: target, token: token,
                                          body: body.map { JSONWriter.string($0) })
        } catch {
            console.error(error.description)
            throw ExitCode(error.isConnect ? Exit.connection : Exit.refused)
        }
        let text = String(decoding: reply.body, as: UTF8.self)
        let parsed = try? JSONParser.parse(text)
        guard (200..<300).contains(reply.status) else {
            let message = parsed?["error"]?.stringValue ?? (text.isEmpty ? "no details" : String(text.prefix(200)))
            if reply.status == 401 || reply.status == 403 {
                console.error("credential refused (HTTP \(reply.status)): \(message)")
                throw ExitCode(Exit.auth)
            }
            console.error("\(method) \(target.split(separator: "?").first.map(String.init) ?? target): HTTP \(reply.status): \(message)")
            throw ExitCode(Exit.refused)
        }
        guard let parsed else {
            console.error("the server's answer is not JSON (HTTP \(reply.status)): \(String(text.prefix(200)))")
            throw ExitCode(Exit.refused)
        }
        return parsed
    }
}

// MARK: - Subcommands

struct AdminConnectionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "List live connections, oldest first.",
        discussion: """
            Examples:
              presence-client admin connections
              presence-client admin connections --ns demo --uid alice
              presence-client admin connections --json
            """)

    @Option(help: "Only connections to this database (namespace).")
    var ns: String?

    @Option(help: "Only connections authenticated as this uid.")
    var uid: String?

    @Option(help: "At most this many connections (default: all).")
    var limit: Int?

    @OptionGroup var options: AdminOptions

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        var connections: [JSON] = []
        var total: JSON = .null
        var cursor: String?
        repeat {
            var query: [(String, String)] = []
            if let uid { query.append(("uid", uid)) }
            if let ns { query.append(("ns", ns)) }
            query.append(("limit", String(min(100, (limit ?? 100) - connections.count))))
            if let cursor { query.append(("cursor", cursor)) }
            let page = try options.call("GET", "/.admin/connections" + AdminHTTP.query(query))
            guard case .array(let items)? = page["connections"] else {
                Console().error("the server's answer has no connections list")
                throw ExitCode(Exit.refused)
            }
            connections += items
            total = page["total"] ?? total
            cursor = page["nextCursor"]?.stringValue
            if items.isEmpty { cursor = nil }
        } while cursor != nil && connections.count < (limit ?? Int.max)

        let console = Console()
        if options.json {
            console.line(JSONWriter.string(.object([("connections", .array(connections)), ("total", total)])))
            return
        }
        if connections.isEmpty {
            console.line(uid != nil || ns != nil ? "no connections match" : "no connections")
            return
        }
        for line in AdminFormat.connectionTable(connections, now: AdminFormat.nowMs()) { console.line(line) }
        let count = Int(total.numberValue ?? Double(connections.count))
        console.line("")
        console.line(count > connections.count
            ? "\(connections.count) of \(count) connections" : "\(count) connection\(count == 1 ? "" : "s")")
    }
}

struct AdminUserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Show one user: live connections, presence value and held sessions (pending onDisconnect ops).",
        discussion: """
            Examples:
              presence-client admin user alice
              presence-client admin user alice --ns demo --json
            """)

    @Argument(help: "The user id.")
    var uid: String

    @Option(help: "Only this database (namespace).")
    var ns: String?

    @OptionGroup var options: AdminOptions

    func validate() throws {
        if uid.isEmpty { throw ValidationError("the uid is empty") }
    }

    func run() throws {
        var query: [(String, String)] = []
        if let ns { query.append(("ns", ns)) }
        let user = try options.call("GET", "/.admin/users/" + AdminHTTP.escape(uid) + AdminHTTP.query(query))
        let console = Console()
        if options.json {
            console.line(JSONWriter.string(user))
            return
        }
        let now = AdminFormat.nowMs()
        console.line(console.paint(uid, .bold))
        console.line("")
        if case .array(let connections)? = user["connections"], !connections.isEmpty {
            console.line("connections (\(connections.count)):")
            for line in AdminFormat.connectionTable(connections, now: now) { console.line("  " + line) }
        } else {
            console.line("connections: none")
        }
        console.line("")
        if let presence = user["presence"]?.objectMembers, !presence.isEmpty {
            console.line("presence:")
            let width = presence.map { $0.0.count }.max() ?? 0
            for (namespace, value) in presence {
                console.line("  " + AdminFormat.pad(namespace + ":", width + 1) + " " + JSONWriter.string(value))
            }
        } else {
            console.line("presence: none")
        }
        console.line("")
        if case .array(let held)? = user["held"], !held.isEmpty {
            console.line("held sessions (\(held.count)):")
            let rows = held.map { h -> [String] in
                let ops: [JSON] = { if case .array(let o)? = h["ops"] { return o }; return [] }()
                return [h["session"]?.stringValue ?? "?", h["namespace"]?.stringValue ?? "?",
                        AdminFormat.ago(h["disconnectedAt"], now: now),
                        AdminFormat.until(h["runAt"], now: now), String(ops.count)]
            }
            for line in AdminFormat.table(["SESSION", "NS", "DISCONNECTED", "OPS RUN", "OPS"], rows, right: [4]) {
                console.line("  " + line)
            }
            for h in held {
                guard case .array(let ops)? = h["ops"], !ops.isEmpty else { continue }
                console.line("")
                console.line("  \(h["session"]?.stringValue ?? "?") will run:")
                for op in ops {
                    console.line("    \(op["path"]?.stringValue ?? "?") = \(op["value"].map { JSONWriter.string($0) } ?? "null")")
                }
            }
        } else {
            console.line("held sessions: none")
        }
        console.line("")
        if case .array(let limits)? = user["limits"], !limits.isEmpty {
            console.line("limit usage (\(limits.count)):")
            let rows = limits.map { l -> [String] in
                [l["limit"]?.stringValue ?? "?", l["namespace"]?.stringValue ?? "?",
                 l["count"]?.numberValue.map { AdminFormat.integer($0) } ?? "?", AdminFormat.ago(l["cooldownStartedAt"], now: now)]
            }
            for line in AdminFormat.table(["LIMIT", "NS", "USES", "COOLDOWN SINCE"], rows, right: [2]) { console.line("  " + line) }
        } else {
            console.line("limit usage: none")
        }
    }
}

struct AdminResetLimitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-limit",
        abstract: "Reset a user's usage of a limit (limits file): 0 uses, no cooldown.",
        discussion: """
            See a user's usage with `presence-client admin user UID`.

            Examples:
              presence-client admin reset-limit bob refreshOnlineUsers --ns demo
            """)

    @Argument(help: "The user id.")
    var uid: String

    @Argument(help: "The limit's name in the limits file.")
    var limit: String

    @Option(help: "The database (namespace); default: the server's default database.")
    var ns: String?

    @OptionGroup var options: AdminOptions

    func run() throws {
        var query: [(String, String)] = []
        if let ns { query.append(("ns", ns)) }
        let reply = try options.call("DELETE", "/.admin/users/" + AdminHTTP.escape(uid) + "/limits/" + AdminHTTP.escape(limit)
                                     + AdminHTTP.query(query))
        let console = Console()
        if options.json {
            console.line(JSONWriter.string(reply))
        } else {
            console.line(reply["reset"]?.boolValue == true ? "reset \(limit) for \(uid)" : "\(uid) had no usage of \(limit)")
        }
    }
}

struct AdminKickCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kick",
        abstract: "Close a connection (WebSocket close code 4002); its onDisconnect ops run as for any disconnect.",
        discussion: """
            Find session ids with `presence-client admin connections`. An unknown session exits 3.

            Examples:
              presence-client admin kick 4f9a1c2e
              presence-client admin kick 4f9a1c2e --reason "signed out by support"
            """)

    @Argument(help: "The session id.")
    var session: String

    @Option(help: "The reason sent with the close frame.")
    var reason: String?

    @OptionGroup var options: AdminOptions

    func validate() throws {
        if session.isEmpty { throw ValidationError("the session is empty") }
        if let reason, reason.utf8.count > 120 {
            throw ValidationError("--reason is at most 120 bytes (a close frame carries 123)")
        }
    }

    func run() throws {
        let body: JSON = reason.map { .object([("reason", .string($0))]) } ?? .object([])
        let reply = try options.call("POST", "/.admin/connections/" + AdminHTTP.escape(session) + "/close", body: body)
        let console = Console()
        if options.json {
            console.line(JSONWriter.string(reply))
        } else {
            console.line("closed \(session)")
        }
    }
}

struct AdminStatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show server counters: connections, held sessions, traffic, uptime.",
        discussion: """
            Examples:
              presence-client admin stats
              presence-client admin stats --json
            """)

    @OptionGroup var options: AdminOptions

    func run() throws {
        let stats = try options.call("GET", "/.admin/stats")
        let console = Console()
        if options.json {
            console.line(JSONWriter.string(stats))
            return
        }
        func n(_ key: String) -> String { stats[key]?.numberValue.map { AdminFormat.integer($0) } ?? "–" }
        func bytes(_ key: String) -> String {
            guard let v = stats[key]?.numberValue else { return "–" }
            return "\(AdminFormat.bytes(v)) (\(AdminFormat.integer(v)))"
        }
        var uptime = "–"
        if let s = stats["uptimeSeconds"]?.numberValue {
            uptime = "\(AdminFormat.duration(s * 1000)) (\(AdminFormat.integer(s)) s)"
        }
        var time = "–"
        if let t = stats["time"]?.numberValue { time = Console.clock(Int64(t)) }
        let rows: [(String, String)] = [
            ("connections", n("connections")), ("sessions held", n("sessionsHeld")), ("namespaces", n("namespaces")),
            ("uptime", uptime), ("messages in", n("messagesIn")), ("messages out", n("messagesOut")),
            ("bytes in", bytes("bytesIn")), ("bytes out", bytes("bytesOut")), ("writes", n("writes")),
            ("pushes", n("pushes")), ("server time", time),
        ]
        let width = rows.map { $0.0.count }.max() ?? 0
        for (name, value) in rows { console.line(AdminFormat.pad(name, width) + "  " + value) }
    }
}

// MARK: - Formatting

enum AdminFormat {
    static func nowMs() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec / 1_000_000)
    }

    static func connectionTable(_ connections: [JSON], now: Double) -> [String] {
        let rows = connections.map { c -> [String] in
            var user = c["uid"]?.stringValue ?? "(anonymous)"
            if c["auth"]?.stringValue == "admin" { user += " [admin]" }
            return [
                c["session"]?.stringValue ?? "?", user, c["namespace"]?.stringValue ?? "?",
                (c["remote"]?.stringValue).map { $0.hasPrefix("::ffff:") ? String($0.dropFirst(7)) : $0 } ?? "–", c["sdk"]?.stringValue ?? "–",
                duration(now - (c["connectedAt"]?.numberValue ?? now)), ago(c["lastFrameAt"], now: now),
                c["listeners"]?.numberValue.map { integer($0) } ?? "–",
                c["onDisconnectOps"]?.numberValue.map { integer($0) } ?? "–",
                c["bytesIn"]?.numberValue.map { bytes($0) } ?? "–",
                c["bytesOut"]?.numberValue.map { bytes($0) } ?? "–",
            ]
        }
        return table(["SESSION", "UID", "NS", "REMOTE", "SDK", "CONNECTED", "LAST FRAME", "LISTENERS", "ONDISC",
                      "IN", "OUT"], rows, right: [5, 6, 7, 8, 9, 10])
    }

    /// Columns padded to their widest cell, two spaces apart; `right` holds right-aligned column indexes.
    static func table(_ headers: [String], _ rows: [[String]], right: Set<Int> = []) -> [String] {
        var widths = headers.map { $0.count }
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for (i, cell) in cells.enumerated() {
                let last = i == cells.count - 1
                if right.contains(i) {
                    parts.append(String(repeating: " ", count: widths[i] - cell.count) + cell)
                } else {
                    parts.append(last ? cell : pad(cell, widths[i]))
                }
            }
            return parts.joined(separator: "  ")
        }
        return [line(headers)] + rows.map(line)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func integer(_ value: Double) -> String {
        value.isFinite && abs(value) < 1e18 ? String(Int64(value)) : String(value)
    }

    static func bytes(_ value: Double) -> String {
        if value < 1024 { return "\(integer(value)) B" }
        var v = value
        var unit = ""
        for u in ["KB", "MB", "GB", "TB"] {
            v /= 1024
            unit = u
            if v < 1024 { break }
        }
        return (v >= 100 ? integer(v.rounded()) : oneDecimal(v)) + " " + unit
    }

    static func oneDecimal(_ v: Double) -> String {
        let tenths = Int64((v * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func duration(_ ms: Double) -> String {
        var s = Int64(max(0, ms) / 1000)
        if s < 60 { return "\(s)s" }
        var m = s / 60
        s %= 60
        if m < 60 { return "\(m)m\(s)s" }
        var h = m / 60
        m %= 60
        if h < 24 { return "\(h)h\(m)m" }
        let d = h / 24
        h %= 24
        return "\(d)d\(h)h"
    }

    static func ago(_ value: JSON?, now: Double) -> String {
        guard let t = value?.numberValue else { return "–" }
        return now - t < 1000 ? "now" : duration(now - t) + " ago"
    }

    static func until(_ value: JSON?, now: Double) -> String {
        guard let t = value?.numberValue else { return "–" }
        return t <= now ? "due" : "in " + duration(t - now)
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0.isWhitespace || $0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

enum FileBytes {
    static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return out }
            out += buffer[0..<n]
        }
    }
}

// MARK: - HTTP

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
        head += "Accept: application/json\r\nUser-Agent: presence-client\r\nConnection: close\r\n"
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
    fileprivate func trimmingCharacters() -> String { String(self).trimmingWhitespace() }
}
