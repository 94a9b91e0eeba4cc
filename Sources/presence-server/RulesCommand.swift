import ArgumentParser
import PresenceCore

/// `presence-server rules check FILE`: does the file load? Exit 0, or print the loader's error.
struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Work with security rules files.",
        subcommands: [Check.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that a rules file loads; exit 0 if it does, 1 with the error if not.",
            discussion: "Example: presence-server rules check rules/presence.rules.json"
        )

        @Argument(help: "The rules file ({\"rules\": {...}}).")
        var file: String

        func run() throws {
            try FileCheck.run(file) { text in
                _ = try RuleSet.load(text: text, source: file)
                return []
            }
        }
    }
}

/// The `check` subcommands: read the file, load it, print `FILE: ok` and a summary, or the error
/// with exit 1.
enum FileCheck {
    static func run(_ file: String, load: (String) throws -> [String]) throws {
        guard let text = RulesFile.readFile(file) else {
            print("error: cannot read \(file)")
            throw ExitCode(1)
        }
        do {
            let summary = try load(text)
            print("\(file): ok")
            for line in summary { print("  " + line) }
        } catch {
            print("error: \(error)")
            throw ExitCode(1)
        }
    }
}
