import ArgumentParser
import PresenceCore

struct AdminKickCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kick",
        abstract: "Close a connection (WebSocket close code 4002); its onDisconnect ops run as for any disconnect.",
        discussion: """
            Find session ids with `presence-client admin connections`. An unknown session exits 3 on a single node; \
            on a cluster (`--storage redis`) a session this node does not hold is forwarded to every node through Redis \
            (HTTP 202), and the node that holds it closes it within a beat (`--node-beat`, 1 s).

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
        } else if reply["forwarded"] == .bool(true) {
            console.line("\(session) is not on this node: the kick was forwarded through Redis; the node that holds it closes it at its next beat")
        } else {
            console.line("closed \(session)")
        }
    }
}
