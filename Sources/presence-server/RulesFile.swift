import ArgumentParser
import Logging
import PresenceCore

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

    static func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
            if count < chunk.count { break }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
