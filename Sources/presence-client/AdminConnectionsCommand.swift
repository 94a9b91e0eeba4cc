import ArgumentParser
import PresenceCore

struct AdminConnectionsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connections",
        abstract: "List live connections, oldest first (on a cluster: every node's, by node).",
        discussion: """
            On a cluster (`--storage redis`) the node asked gathers every live node's connections \
            through Redis; nodes that did not answer in time are named after the table.

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
        var missing: Set<String> = []
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
            if case .array(let names)? = page["missing"] { missing.formUnion(names.compactMap(\.stringValue)) }
            if items.isEmpty { cursor = nil }
        } while cursor != nil && connections.count < (limit ?? Int.max)

        let console = Console()
        if options.json {
            console.line(JSONWriter.string(.object([("connections", .array(connections)), ("total", total),
                                                    ("missing", .array(missing.sorted().map { .string($0) }))])))
            return
        }
        defer {
            if !missing.isEmpty { console.line("not listed (did not answer in time): \(missing.sorted().joined(separator: ", "))") }
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
