import ArgumentParser
import Foundation
import PresenceClient
import PresenceCore

struct SimulateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Simulate an app's lifecycle and its presence writes for one user.",
        discussion: """
            Lifecycle events come from the keyboard or standard input, one per line:
              foreground (fg)   the app becomes active: onDisconnect().set(offline), then set online
              background (bg)   the app goes to the background: set offline
              inactive          the app is inactive (a call, the app switcher): set offline
              terminate         best-effort offline write, then a clean close; exits
              kill              drop the socket with no close frame and exit (the server's onDisconnect does the rest)
              network-off       stop all traffic on the socket without closing it (the server must notice the silence)
              network-on        resume, probe the connection, reconnect if it is dead
              sleep <duration>  wait before reading the next line (1.5s, 500ms)
              quit              close cleanly and exit (end of input too, without --script)

            Transitions are debounced (--debounce): only a state that stands for the whole window is written, so background then foreground within 3 s writes nothing. Every write (with lastSeen = ServerValue.TIMESTAMP), its ack and the connection state are printed.

            Script files (--script) hold timed lines: "+1.5s background" runs 1.5 s after the previous line, "10s quit" 10 s after the start; # starts a comment.

            Examples:
              presence-client simulate --uid alice
              printf 'foreground\\nsleep 5s\\nbackground\\nsleep 4s\\nquit\\n' | presence-client simulate --uid alice
              presence-client simulate --uid alice --script day.txt --json
              presence-client simulate --uid alice --secret-file secret.txt --server ws://10.0.0.5:9000
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "A timed script of lifecycle events (e.g. lines like +1.5s background).")
    var script: String?

    @Option(help: "Debounce window for lifecycle transitions (e.g. 3s, 500ms, 0).")
    var debounce = "3s"

    @Option(help: "Seconds after network-on within which the server must answer a ping, else reconnect.")
    var probeTimeout: Double = 3

    @Flag(help: "Print one JSON object per line instead of text.")
    var json = false

    func validate() throws {
        guard connection.uid != nil else { throw ValidationError("simulate needs --uid (the user whose presence it writes)") }
        guard parseDuration(debounce) != nil else { throw ValidationError("--debounce must be a duration such as 3s or 500ms") }
    }

    func run() throws {
        guard let uid = connection.uid, let debounceMs = parseDuration(debounce) else { throw ExitCode(64) }
        var scriptSteps: LifecycleScript?
        if let script {
            guard let text = try? String(contentsOfFile: script, encoding: .utf8) else {
                throw ValidationError("cannot read --script \(script)")
            }
            do {
                scriptSteps = try LifecycleScript.parse(text)
            } catch {
                throw ValidationError("--script \(script): \(error)")
            }
        }
        var config = try connection.configuration(failFast: true)
        config.probeTimeoutMilliseconds = Int64(probeTimeout * 1000)
        let simulator = Simulator(uid: uid, debounce: debounceMs, json: json, configuration: config)
        let code = simulator.run(script: scriptSteps)
        if code != 0 { throw ExitCode(code) }
    }
}

/// The simulate command's state, confined to the service thread (except the input threads, which
/// only post into it).
final class Simulator: @unchecked Sendable {
    let session: Session
    let json: Bool
    var presence: AppPresence
    var console: Console { session.console }
    /// Writes issued by the app, for printing their acks.
    var writes: [WriteID: Bool] = [:]
    var onDisconnects: Set<OnDisconnectID> = []
    var terminating: WriteID?
    var terminateDeadline: Int64?
    var ended = false

    init(uid: String, debounce: Int64, json: Bool, configuration: ClientConfiguration) {
        session = Session(configuration: configuration)
        presence = AppPresence(uid: uid, debounceMilliseconds: debounce)
        self.json = json
    }

    func run(script: LifecycleScript?) -> Int32 {
        session.run(
            onEvent: { [self] _, event in handle(event) },
            onTick: { [self] _, now in
                if presence.nextDeadline.map({ now >= $0 }) == true { apply(presence.timerFired(now: now)) }
                if let deadline = terminateDeadline, now >= deadline {
                    terminateDeadline = nil
                    out("note", [("text", "no ack for the offline write; closing anyway")], text: "no ack for the offline write; closing anyway")
                    finish(Exit.ok)
                }
            },
            onSignal: { [self] _, signal in
                out("signal", [("signal", .number(Double(signal)))], text: "signal \(signal): closing")
                finish(Exit.ok)
            },
            setup: { [self] _ in
                out("start", [("uid", .string(presence.uid)), ("debounce_ms", .number(Double(presence.debounceMilliseconds)))],
                    text: "simulating \(presence.uid) (debounce \(StatusText.seconds(presence.debounceMilliseconds)) s)")
                startInput(script: script)
            })
    }

    // MARK: output

    func out(_ event: String, _ members: [(String, JSON)], text: String) {
        let now = session.runtime.now
        if json {
            console.line(Console.json([("t", .number(Double(now))), ("event", .string(event))] + members))
        } else {
            console.line(console.paint(Console.clock(now), .dim) + "  " + text)
        }
    }

    static func describe(_ value: JSON) -> String {
        JSONWriter.string(value).replacingOccurrences(of: "{\".sv\":\"timestamp\"}", with: "TIMESTAMP")
    }

    // MARK: input

    private func startInput(script: LifecycleScript?) {
        let runtime = session.runtime
        if let script {
            let start = runtime.now
            let steps = script.steps
            Thread.detachNewThread { [self] in
                for step in steps {
                    let wait = start + step.at - ClientRuntime.realTimeMilliseconds()
                    if wait > 0 { usleep(useconds_t(min(wait, 3_600_000) * 1000)) }
                    let command = step.command
                    runtime.perform { [self] _ in lifecycle(command) }
                }
            }
        }
        let quitOnEOF = script == nil
        Thread.detachNewThread { [self] in
            while let line = readLine() {
                guard let parsed = LifecycleCommand.parse(line) else {
                    runtime.perform { [self] _ in
                        console.note("unknown command \(line.trimmingCharacters(in: .whitespaces)) (use \(LifecycleCommand.help))")
                    }
                    continue
                }
                guard let command = parsed else { continue }
                if case .sleep(let ms) = command {
                    runtime.perform { [self] _ in out("lifecycle", [("command", .string(command.name))], text: command.name) }
                    usleep(useconds_t(min(ms, 3_600_000) * 1000))
                    continue
                }
                runtime.perform { [self] _ in lifecycle(command) }
            }
            if quitOnEOF { runtime.perform { [self] _ in lifecycle(.quit) } }
        }
    }

    // MARK: lifecycle

    func lifecycle(_ command: LifecycleCommand) {
        guard !ended else { return }
        out("lifecycle", [("command", .string(command.name))], text: console.paint(command.name, .bold))
        let now = session.runtime.now
        switch command {
        case .foreground: apply(presence.lifecycle(.active, now: now))
        case .background: apply(presence.lifecycle(.background, now: now))
        case .inactive: apply(presence.lifecycle(.inactive, now: now))
        case .terminate:
            let actions = presence.terminate(now: now)
            if session.runtime.connection.isConnected {
                terminating = apply(actions)
                terminateDeadline = session.runtime.now + 2000  // best effort: do not wait for ever
            } else {
                out("note", [("text", "offline: the offline write is skipped")], text: "offline: the offline write is skipped")
                finish(Exit.ok)
            }
        case .kill:
            ended = true
            out("exit", [("how", "kill")], text: "kill: dropping the socket")
            session.end(Exit.ok, clean: false, grace: 300)
        case .networkOff:
            session.runtime.withConnection { c, now in c.networkOff(now: now) }
        case .networkOn:
            session.runtime.withConnection { c, now in c.networkOn(now: now) }
        case .quit:
            finish(Exit.ok)
        case .sleep:
            break
        }
    }

    private func finish(_ code: Int32) {
        guard !ended else { return }
        ended = true
        out("exit", [("how", "close")], text: "closing")
        session.end(code)
    }

    /// Issues the actions; returns the id of the last write.
    @discardableResult
    func apply(_ actions: [PresenceAction]) -> WriteID? {
        var last: WriteID?
        for action in actions {
            switch action {
            case .registerOnDisconnect(let path, let value):
                let id = session.runtime.withConnection { c, now in c.onDisconnectSet(path, value, now: now) }
                onDisconnects.insert(id)
                out("ondisconnect", [("id", .number(Double(id))), ("path", .string(path.description)), ("value", value)],
                    text: "onDisconnect #\(id) \(path) set \(Self.describe(value))")
            case .write(let path, let value, let online):
                let connected = session.runtime.connection.isConnected
                let id = session.runtime.withConnection { c, now in c.set(path, value, now: now) }
                writes[id] = online
                last = id
                out("write", [("id", .number(Double(id))), ("path", .string(path.description)), ("online", .bool(online)),
                              ("value", value), ("queued", .bool(!connected))],
                    text: "write #\(id) \(path) \(Self.describe(value))" + (connected ? "" : " (queued until connected)"))
            }
        }
        return last
    }

    func handle(_ event: ClientEvent) {
        switch event {
        case .status(let status):
            var members = StatusText.json(status)
            let text = StatusText.text(status)
            members.insert(("text", .string(text)), at: 0)
            let tint: Console.Tint
            switch status {
            case .connected: tint = .green
            case .disconnected, .waitingForNetwork: tint = .red
            default: tint = .yellow
            }
            out("connection", members, text: console.paint(text, tint))
            if case .connected = status, !ended {
                let queued = session.runtime.connection.hasPendingWrite(at: presence.path)
                apply(presence.reconnected(alreadyQueued: queued))
            }
        case .writeCompleted(let id, let failure):
            guard let online = writes.removeValue(forKey: id) else { return }
            let status = failure?.status ?? "ok"
            out("ack", [("id", .number(Double(id))), ("online", .bool(online)), ("status", .string(status))]
                    + (failure.map { [("message", JSON.string($0.message))] } ?? []),
                text: "ack #\(id) " + (failure.map { console.paint("\($0)", .red) } ?? console.paint("ok", .green)))
            if id == terminating { finish(Exit.ok) }
        case .onDisconnectCompleted(let id, let failure):
            guard onDisconnects.contains(id) else { return }
            out("ack", [("id", .number(Double(id))), ("status", .string(failure?.status ?? "ok"))],
                text: "ack onDisconnect #\(id) " + (failure.map { console.paint("\($0)", .red) } ?? console.paint("ok", .green)))
        case .writeSent(let id, _):
            _ = id
        case .authFailed(let failure):
            out("auth", [("status", .string(failure.status)), ("message", .string(failure.message))], text: "authentication failed: \(failure)")
        case .authenticated:
            break
        case .serverMessage(let text):
            out("server", [("text", .string(text))], text: text)
        default:
            break
        }
    }
}
