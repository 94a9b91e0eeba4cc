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

/// Loads the limits named by `--limits`.
enum LimitsFile {
    static let defaultPath = "rules/limits.json"

    /// nil when nothing is limited: `none`, or the default file is absent.
    static func load(_ name: String, logger: Logger) throws -> LimitSet? {
        if name == "none" { return nil }
        guard let text = TextFile.read(name) else {
            if name == defaultPath, access(name, F_OK) != 0 {
                logger.notice("limits: \(name) not found, nothing is limited")
                return nil
            }
            throw RulesFileError.unreadable(name)
        }
        return try LimitSet.load(text: text, source: name)
    }
}
