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
            try FileCheck.run(file) { text in
                let limits = try LimitSet.load(text: text, source: file)
                return limits.limits.map { limit in
                    let tiers = limit.tiers.map { tier in
                        switch tier.allowance {
                        case .unlimited: return "\(tier.name) unlimited"
                        case .limited(let uses, let cooldown?): return "\(tier.name) \(uses) per \(Double(cooldown) / 1000) s"
                        case .limited(let uses, nil): return "\(tier.name) \(uses) in all"
                        }
                    }
                    let writes = limit.operation == .write ? " (writes)" : ""
                    return "\(limit.name) at \(limit.location)\(writes): \(tiers.joined(separator: ", "))"
                } + ["status at \(limits.statusLocation)/<limit>"]
            }
        }
    }
}
