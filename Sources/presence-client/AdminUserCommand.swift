import ArgumentParser
import PresenceCore

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
