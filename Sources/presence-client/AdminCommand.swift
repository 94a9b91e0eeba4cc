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
              presence-client admin nodes
              presence-client admin stats --server http://10.0.0.5:9000 \\
                  --admin-token-file admin.txt
            """,
        subcommands: [AdminConnectionsCommand.self, AdminUserCommand.self, AdminKickCommand.self, AdminResetLimitCommand.self,
                      AdminStatsCommand.self, AdminNodesCommand.self]
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
