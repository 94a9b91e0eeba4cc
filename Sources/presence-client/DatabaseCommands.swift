import ArgumentParser
import PresenceClient
import PresenceCore

/// Shared body of the one-shot commands: connect (no retry), issue one request, wait for its answer.
enum OneShot {
    static func failureCode(_ failure: RequestFailure) -> Int32 {
        failure.isCredentialProblem ? Exit.auth : Exit.refused
    }

    /// Runs a single write and prints `ok` (or `okText`).
    static func write(_ options: ConnectionOptions, describe: String, okText: String = "ok",
                      issue: @escaping (inout ClientConnection, Int64) -> WriteID) throws -> Int32 {
        let session = Session(configuration: try options.configuration(failFast: true))
        var id: WriteID?
        return session.run(
            onEvent: { s, event in
                switch event {
                case .writeCompleted(let w, let failure) where w == id:
                    if let failure {
                        s.console.error("\(describe): \(failure)")
                        s.end(failureCode(failure))
                    } else {
                        s.console.line(okText)
                        s.end(Exit.ok)
                    }
                default: break
                }
            },
            setup: { s in id = s.runtime.withConnection { c, now in issue(&c, now) } })
    }
}

struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Read the value at a path once and print it as JSON.",
        discussion: """
            Examples:
              presence-client get users/alice/presence --uid bob
              presence-client get / --admin --ns demo
              presence-client get users --token-file token.txt --server ws://127.0.0.1:9000
            """)

    @Argument(help: "The path, e.g. users/alice/presence (/ is the root).")
    var path: String

    @Flag(help: "Print the JSON indented.")
    var pretty = false

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let path = try parsePath(self.path)
        let pretty = self.pretty
        let session = Session(configuration: try connection.configuration(failFast: true))
        var id: GetID?
        let code = session.run(
            onEvent: { s, event in
                switch event {
                case .getCompleted(let g, let value, let failure) where g == id:
                    if let failure {
                        s.console.error("get \(path): \(failure)")
                        s.end(OneShot.failureCode(failure))
                    } else {
                        s.console.line(pretty ? JSONWriter.pretty(value ?? .null) : JSONWriter.string(value ?? .null))
                        s.end(Exit.ok)
                    }
                default: break
                }
            },
            setup: { s in id = s.runtime.withConnection { c, now in c.get(path, now: now) } })
        if code != 0 { throw ExitCode(code) }
    }
}

let serverValueHelp = """
    Values are JSON; anything that is not valid JSON is a string. Server values: the string .sv:timestamp (ServerValue.TIMESTAMP) and .sv:increment:N, alone or anywhere inside the JSON, or the raw {".sv":"timestamp"}.
    """

struct SetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Overwrite the value at a path.",
        discussion: """
            \(serverValueHelp)

            Examples:
              presence-client set users/alice/presence '{"online":true,"lastSeen":".sv:timestamp"}' --uid alice
              presence-client set counters/visits .sv:increment:1 --admin
              presence-client set users/alice/name '"Alice"' --token-file alice.jwt
            """)

    @Argument(help: "The path.") var path: String
    @Argument(help: "The value (JSON).") var value: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let path = try parsePath(self.path)
        let value = ServerValueSyntax.parse(self.value)
        let code = try OneShot.write(connection, describe: "set \(path)") { c, now in c.set(path, value, now: now) }
        if code != 0 { throw ExitCode(code) }
    }
}

struct UpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Update children of a path: each key (a relative path) replaces the value below it.",
        discussion: """
            \(serverValueHelp)

            Examples:
              presence-client update users/alice/presence '{"online":false,"lastSeen":".sv:timestamp"}' --uid alice
              presence-client update / '{"users/alice/presence/online":true,"users/alice/presence/lastSeen":".sv:timestamp"}' --admin
            """)

    @Argument(help: "The path.") var path: String
    @Argument(help: "A JSON object of relative paths to values.") var value: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let path = try parsePath(self.path)
        guard case .object(let members) = ServerValueSyntax.parse(self.value) else {
            throw ValidationError("update needs a JSON object, e.g. '{\"online\":true}'")
        }
        let code = try OneShot.write(connection, describe: "update \(path)") { c, now in c.update(path, members, now: now) }
        if code != 0 { throw ExitCode(code) }
    }
}

struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Add a child with a new push id under a path and print the new key.",
        discussion: """
            \(serverValueHelp)

            Examples:
              presence-client push messages '{"text":"hi","at":".sv:timestamp"}' --admin
              presence-client push events/alice '"signed-in"' --uid alice
            """)

    @Argument(help: "The parent path.") var path: String
    @Argument(help: "The value (JSON).") var value: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let parent = try parsePath(self.path)
        let value = ServerValueSyntax.parse(self.value)
        var generator = PushID.Generator()
        let key = generator.next(now: ClientRuntime.realTimeMilliseconds())
        let path = parent.child(key)
        let code = try OneShot.write(connection, describe: "push \(parent)", okText: key) { c, now in c.set(path, value, now: now) }
        if code != 0 { throw ExitCode(code) }
    }
}

struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Delete the value at a path.",
        discussion: """
            Examples:
              presence-client remove users/alice/presence --uid alice
              presence-client remove / --admin --ns scratch
            """)

    @Argument(help: "The path.") var path: String
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let path = try parsePath(self.path)
        let code = try OneShot.write(connection, describe: "remove \(path)") { c, now in c.remove(path, now: now) }
        if code != 0 { throw ExitCode(code) }
    }
}

struct ListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Print the value at a path now and every time it changes (one JSON line each).",
        discussion: """
            Runs until interrupted, or until --count values were printed. Reconnects after a loss (the connection state goes to standard error).

            Examples:
              presence-client listen users/alice/presence --uid bob
              presence-client listen users --admin --json
              presence-client listen users/alice/presence --uid bob --count 1
            """)

    @Argument(help: "The path.") var path: String
    @Flag(help: "Print {\"path\":…,\"value\":…,\"t\":…} objects instead of bare values.") var json = false
    @Option(help: "Exit after this many values.") var count: Int?
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let path = try parsePath(self.path)
        let json = self.json
        let count = self.count
        let session = Session(configuration: try connection.configuration(failFast: true))
        var printed = 0
        let code = session.run(
            onEvent: { s, event in
                switch event {
                case .value(_, let p, let value):
                    if json {
                        s.console.line(Console.json([("path", .string(p.description)), ("value", value),
                                                     ("t", .number(Double(s.runtime.now)))]))
                    } else {
                        s.console.line(JSONWriter.string(value))
                    }
                    printed += 1
                    if let count, printed >= count { s.end(Exit.ok) }
                case .listenFailed(_, let p, let failure):
                    s.console.error("listen \(p): \(failure)")
                    s.end(OneShot.failureCode(failure))
                case .status(let status):
                    s.note(status)
                default: break
                }
            },
            setup: { s in _ = s.runtime.withConnection { c, now in c.listen(path, now: now) } })
        if code != 0 { throw ExitCode(code) }
    }
}

/// Human wording of connection states.
enum StatusText {
    static func text(_ status: ConnectionStatus) -> String {
        switch status {
        case .connecting(let attempt): attempt > 1 ? "connecting (attempt \(attempt))" : "connecting"
        case .connected(let session): "connected (session \(session))"
        case .disconnected(let reason): "disconnected: \(reason)"
        case .reconnecting(let ms): "reconnecting in \(seconds(ms)) s"
        case .waitingForNetwork: "offline: waiting for the network"
        case .stopped: "stopped"
        }
    }

    static func seconds(_ ms: Int64) -> String {
        let tenths = (ms + 50) / 100
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func json(_ status: ConnectionStatus) -> [(String, JSON)] {
        switch status {
        case .connecting(let attempt): [("state", "connecting"), ("attempt", .number(Double(attempt)))]
        case .connected(let session): [("state", "connected"), ("session", .string(session))]
        case .disconnected(let reason): [("state", "disconnected"), ("reason", .string(reason))]
        case .reconnecting(let ms): [("state", "reconnecting"), ("in_ms", .number(Double(ms)))]
        case .waitingForNetwork: [("state", "waiting_for_network")]
        case .stopped: [("state", "stopped")]
        }
    }
}
