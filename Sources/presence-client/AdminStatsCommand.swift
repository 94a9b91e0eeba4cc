import ArgumentParser
import PresenceCore

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
