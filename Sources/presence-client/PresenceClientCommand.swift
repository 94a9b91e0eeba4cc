import ArgumentParser
import PresenceClient

struct PresenceClientCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence-client",
        abstract: "The companion CLI of presence-server.",
        discussion: """
            Every command that talks to a server takes --server ws://host:port (default ws://127.0.0.1:9000), --ns, and one of --token, --token-file, --secret-file with --uid, --admin, or --uid alone (an unsigned token for that uid, for servers in emulator auth mode). Exit codes: 0 ok, 2 connection failed, 3 request refused (permission denied, bad data), 4 credential refused, 5 refresh limit reached (online, without --wait), 64 bad arguments.

            Examples:
              presence-client simulate --uid alice
              presence-client watch alice bob --uid carol
              presence-client online --uid bob --claim subscription=lite
              presence-client get users/alice/presence --uid bob
              presence-client set users/alice/presence '{"online":true,"lastSeen":".sv:timestamp"}' --uid alice
              presence-client token --uid alice --secret-file secret.txt --ttl 1h
              presence-client token --uid alice --secret-file secret.txt --claim subscription=lite
            """,
        version: PresenceClientVersion.current,
        subcommands: [
            AdminCommand.self,
            SimulateCommand.self, WatchCommand.self, OnlineCommand.self,
            GetCommand.self, SetCommand.self, UpdateCommand.self, PushCommand.self, RemoveCommand.self, ListenCommand.self,
            TokenCommand.self,
        ]
    )
}
