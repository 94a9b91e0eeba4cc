import Crypto

/// A Lua script, run with `EVALSHA` (the SHA-1 is computed here, so no round trip is needed to
/// learn it) and re-sent with `EVAL` when Redis answers NOSCRIPT: after a restart, a `SCRIPT
/// FLUSH` or a failover, Redis's script cache is empty. Connections also `SCRIPT LOAD` the scripts
/// registered with them each time they connect, so the fallback is the rare path.
public struct RedisScript: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let source: String
    /// Lower-case hex, as Redis names scripts.
    public let sha1: String

    public init(name: String, source: String) {
        self.name = name
        self.source = source
        sha1 = Insecure.SHA1.hash(data: Array(source.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    public var description: String { "\(name) (\(sha1.prefix(8)))" }

    var loadCommand: RedisCommand { RedisCommand("SCRIPT", "LOAD", source) }

    func command(_ verb: String, _ script: String, keys: [any RedisArgument], arguments: [any RedisArgument]) -> RedisCommand {
        let head: [any RedisArgument] = [script, keys.count]
        return RedisCommand(verb, head + keys + arguments)
    }
}

extension RedisConnection {
    /// Runs `script` with `keys` (all in one hash slot) and `arguments`. One timeout covers the
    /// NOSCRIPT retry too. A retried call runs after commands pipelined behind the first try, so
    /// callers that need two script calls in a given order wait for the first reply.
    public func evaluate(_ script: RedisScript, keys: [any RedisArgument], arguments: [any RedisArgument],
                         timeoutMilliseconds: Int64? = nil,
                         completion: @escaping (Result<RedisReply, RedisError>) -> Void) {
        let deadline = clock.milliseconds() + max(1, timeoutMilliseconds ?? options.commandTimeoutMilliseconds)
        let byHash = script.command("EVALSHA", script.sha1, keys: keys, arguments: arguments)
        send(byHash, deadline: deadline) { result in
            guard case .success(.error(let message)) = result, message.hasPrefix("NOSCRIPT") else {
                return completion(result)
            }
            self.countScriptReload()
            self.send(script.command("EVAL", script.source, keys: keys, arguments: arguments), deadline: deadline,
                      completion: completion)
        }
    }
}
