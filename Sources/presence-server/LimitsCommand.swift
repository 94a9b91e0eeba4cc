import ArgumentParser
import PresenceCore

/// `presence-server limits check FILE`: does the limits file load? Exit 0 with a summary, or 1 with
/// the loader's error (the same check a SIGHUP reload makes before replacing the limits in force).
struct LimitsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limits",
        abstract: "Work with limits files.",
        subcommands: [Check.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that a limits file loads; exit 0 if it does, 1 with the error if not.",
            discussion: "Example: presence-server limits check rules/limits.json"
        )

        @Argument(help: "The limits file ({\"limits\": {...}}).")
        var file: String

        func run() throws {
            guard let text = RulesFile.readFile(file) else {
                print("error: cannot read \(file)")
                throw ExitCode(1)
            }
            do {
                let limits = try LimitSet.load(text: text, source: file)
                print("\(file): ok")
                for limit in limits.limits {
                    let tiers = limit.tiers.map { tier in
                        switch tier.allowance {
                        case .unlimited: return "\(tier.name) unlimited"
                        case .limited(let uses, let cooldown?): return "\(tier.name) \(uses) per \(Double(cooldown) / 1000) s"
                        case .limited(let uses, nil): return "\(tier.name) \(uses) in all"
                        }
                    }
                    print("  \(limit.name) at \(limit.location): \(tiers.joined(separator: ", "))")
                }
                print("  status at \(limits.statusLocation)/<limit>")
            } catch {
                print("error: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
