import ArgumentParser
import PresenceCore

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
