import PresenceCore

#if canImport(Glibc)
import Glibc
#endif

/// `--config FILE`: a JSON object of flag names (without dashes) to values. Unknown keys and values
/// of the wrong type are errors that name the key; the flags themselves then validate the values.
enum ConfigFile {
    /// Flags that take a value, and boolean flags.
    static let valueFlags = Set<String>([
        "host", "port", "rules", "auth", "secret-file", "project-id", "firebase-keys", "admin-token-file",
        "default-namespace", "max-message-bytes", "ping-interval", "idle-timeout", "rx-buffer", "disconnect-grace",
        "stream-keep-alive", "data-dir", "storage", "durability", "tls-cert", "tls-key", "max-connections-per-address",
        "max-connection-rate", "max-accepts-per-turn", "log-level", "online-pattern", "online-field", "online-location",
        "limits", "limit-events", "trusted-proxies", "max-listens-per-connection", "max-queries-per-location", "max-ondisconnect-ops",
        "max-ondisconnect-bytes", "max-read-bytes", "max-hash-bytes", "max-namespaces", "slice-reads-over", "slice-microseconds",
        // Floods and slow clients (docs/robustness.md)
        "max-pending-body-bytes", "http-timeout", "max-fds", "max-messages-per-second", "message-burst", "max-queued-bytes",
        // Past saturation (docs/performance.md, issue 17)
        "pushback-pending-writes", "pushback-queued-bytes", "pushback-stall-seconds",
    ]).union(SheddingOptions.flagNames).union(ClusterOptions.flagNames)
    static let booleanFlags: Set<String> = ["insecure"]

    static func expand(_ arguments: [String]) -> [String] {
        guard let index = arguments.firstIndex(where: { $0 == "--config" || $0.hasPrefix("--config=") }) else { return arguments }
        let path: String
        var rest = arguments
        if arguments[index].hasPrefix("--config=") {
            path = String(arguments[index].dropFirst("--config=".count))
            rest.remove(at: index)
        } else {
            guard index + 1 < arguments.count else { return arguments }  // let the parser report it
            path = arguments[index + 1]
            rest.removeSubrange(index...index + 1)
        }
        do {
            return try ConfigFile.arguments(fromFile: path) + rest
        } catch {
            fail("\(error)")
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func arguments(fromFile path: String) throws -> [String] {
        guard let text = RulesFile.readFile(path) else { throw Failure(description: "cannot read the configuration file \(path)") }
        let json: JSON
        do { json = try JSONParser.parse(text) } catch { throw Failure(description: "\(path): \(error)") }
        guard case .object(let members) = json else { throw Failure(description: "\(path): the configuration must be a JSON object") }
        var result: [String] = []
        for (key, value) in members {
            if booleanFlags.contains(key) {
                guard case .bool(let on) = value else { throw Failure(description: "\(path): \"\(key)\" must be true or false") }
                if on { result.append("--\(key)") }
                continue
            }
            guard valueFlags.contains(key) else {
                throw Failure(description: "\(path): unknown key \"\(key)\" (keys are the flags of presence-server --help, without the dashes)")
            }
            switch value {
            case .null: continue
            case .string(let text): result += ["--\(key)", text]
            case .number(let number): result += ["--\(key)", number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)]
            default: throw Failure(description: "\(path): \"\(key)\" must be a string or a number")
            }
        }
        return result
    }

    static func fail(_ message: String) -> Never {
        var text = "Error: \(message)\n"
        text.withUTF8 { buffer in _ = write(2, buffer.baseAddress, buffer.count) }
        exit(64)
    }
}
