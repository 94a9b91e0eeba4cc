import ArgumentParser

struct PresenceClientCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence-client",
        abstract: "The companion CLI of presence-server.",
        discussion: """
            Examples:
              presence-client token --uid alice --secret-file secret.txt --ttl 1h
              presence-client token --uid alice --secret-file secret.txt --claim subscription=lite
            """,
        subcommands: [TokenCommand.self]
    )
}
