import ArgumentParser
import PresenceCore

struct AdminKickCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kick",
        abstract: "Close a connection (WebSocket close code 4002); its onDisconnect ops run as for any disconnect.",
        discussion: """
            Find session ids with `presence-client admin connections`. An unknown session exits 3. On a cluster \
            (`--storage redis`) a session this node does not hold is asked of every live node through Redis: the node \
            that holds it closes it and the kick says which node that was; if some nodes did not answer in time \
            (HTTP 202) they are named, and they still close it when they read the kick.

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
            var missing = ""
            if case .array(let names)? = reply["missing"] { missing = names.compactMap(\.stringValue).joined(separator: ", ") }
            console.line("\(session) is on no node that answered; forwarded to the nodes that did not answer in time (\(missing)): they close it when they read the kick")
        } else if let node = reply["node"]?.stringValue {
            console.line("closed \(session) on node \(node)")
        } else {
            console.line("closed \(session)")
        }
    }
}
