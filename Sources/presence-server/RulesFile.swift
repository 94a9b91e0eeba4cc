import ArgumentParser
import Logging
import PresenceCore
import PresenceServer

#if canImport(Glibc)
import Glibc
#endif

enum RulesFileError: Error, CustomStringConvertible {
    case unreadable(String)
    var description: String {
        switch self {
        case .unreadable(let name): return "cannot read rules file \(name)"
        }
    }
}

/// Loads the rules named by `--rules` into an access policy.
enum RulesFile {
    static func loadPolicy(_ name: String, logger: Logger) throws -> any AccessPolicy {
        if name == "open" {
            logger.warning("rules: 'open' allows every read and write to everyone")
            return OpenAccessPolicy()
        }
        guard let text = readFile(name) else { throw RulesFileError.unreadable(name) }
        return try RuleSet.load(text: text, source: name)
    }

    static func readFile(_ path: String) -> String? { TextFile.read(path) }
}
