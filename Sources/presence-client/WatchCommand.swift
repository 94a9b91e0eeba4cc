import ArgumentParser
import Foundation
import PresenceClient
import PresenceCore

struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show users' presence live, as the app's UI does: ● Online or ○ Last seen 5m ago.",
        discussion: """
            One row per user, updated as events arrive and as time passes ("just now", "Nm ago", "Nh ago", "yesterday", "N days ago", then a date). On a terminal the table is redrawn in place; otherwise a row is printed whenever its text changes. With --json, one JSON object per change: {"uid","online","lastSeen","status","t"} (t and lastSeen in ms since the epoch, server clock). Connection states go to standard error.

            After 3 consecutive failed connection attempts the rows are also polled over the REST API on the same host and port (GET /users/<uid>/presence.json, or /users.json with --all, with the same credential; http:// for ws://, https:// for wss://) every 15 s, jittered, while the WebSocket keeps reconnecting in the background, until a WebSocket connection stays up for 30 s. The footer (or standard error, off a terminal) shows "next update in N s"; a failed poll is reported once on standard error and retried. Over https the polls trust the system's certificate authorities only (--ca-file and --insecure-skip-verify apply to the WebSocket). watch keeps retrying while the server can be reached either way, and exits (code 2) when neither the WebSocket nor the REST API ever answered.

            Examples:
              presence-client watch alice bob --uid carol
              presence-client watch --all --admin
              presence-client watch alice --uid bob --json | jq .
            """)

    @Argument(help: "The users to watch.")
    var users: [String] = []

    @Flag(help: "Watch every user under users/.")
    var all = false

    @Flag(help: "Print one JSON object per line for each change.")
    var json = false

    @Option(help: ArgumentHelp("Seconds between polls in the polling fallback (default 15; shorter for testing).",
                               valueName: "seconds"))
    var pollInterval = 15

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if pollInterval < 1 { throw ValidationError("--poll-interval must be at least 1 second") }
        if users.isEmpty, !all { throw ValidationError("name the users to watch, or use --all") }
        if all, !users.isEmpty { throw ValidationError("--all watches every user; do not name users with it") }
        for user in users where !Path.isValidKey(user) {
            throw ValidationError("\(user) is not a valid user id")
        }
    }

    func run() throws {
        // Not fail-fast: a server whose WebSocket cannot be reached may still answer REST polls (the
        // watcher gives up itself when neither ever answers).
        let interval = Int64(pollInterval) * 1000
        let policy = RefreshPolicy(intervalMilliseconds: interval, jitter: WatchRefresh.pollPolicy.jitter,
                                   retryMilliseconds: min(interval, WatchRefresh.pollPolicy.retryMilliseconds))
        let watcher = Watcher(users: users, all: all, json: json, configuration: try connection.configuration(failFast: false),
                              pollPolicy: policy, http: URLSessionHTTP())
        let code = watcher.run()
        if code != 0 { throw ExitCode(code) }
    }
}

/// The watch command's state, confined to the service thread.
final class Watcher: @unchecked Sendable {
    let session: Session
    let users: [String]
    let all: Bool
    let json: Bool
    var board: PresenceBoard
    let formatter: LastSeenFormatter
    var shown: [String: String] = [:]
    var listeners: [ListenerID: String] = [:]  // listener → uid ("" for --all)
    var drawnLines = 0
    var connected = false
    /// Wording redraws.
    var scheduler = RefreshScheduler(store: InMemoryRefreshStore(), concurrencyLimit: 4)
    /// After repeated connection failures, REST polls.
    var poller: WatchPoller
    let http: any HTTPGetting
    var lastPollNote = ""
    var console: Console { session.console }

    init(users: [String], all: Bool, json: Bool, configuration: ClientConfiguration, pollPolicy: RefreshPolicy,
         http: any HTTPGetting) {
        session = Session(configuration: configuration)
        poller = WatchPoller(endpoint: RESTEndpoint(configuration: configuration), users: users, all: all, policy: pollPolicy)
        self.http = http
        self.users = users
        self.all = all
        self.json = json
        board = PresenceBoard(uids: users)
        formatter = LastSeenFormatter(timeZoneOffsetSeconds: Int64(TimeZone.current.secondsFromGMT()))
        scheduler.register(WatchRefresh.wordingKind, RefreshPolicy(intervalMilliseconds: 1000))
    }

    /// Now on the server's clock (lastSeen values are server times).
    var serverNow: Int64 { session.runtime.now + session.runtime.connection.serverTimeOffset }

    func run() -> Int32 {
        session.run(
            onEvent: { [self] s, event in
                switch event {
                case .value(let id, _, let value):
                    guard let uid = listeners[id] else { return }
                    apply(uid.isEmpty ? board.apply(users: value) : board.apply(uid: uid, presence: value))
                case .listenFailed(_, let path, let failure):
                    s.console.error("listen \(path): \(failure)")
                    s.end(OneShot.failureCode(failure))
                case .status(let status):
                    if case .connected = status {
                        connected = true
                        poller.connected(now: s.runtime.now)
                    } else if case .disconnected = status {
                        connected = false
                        pollingChanged(poller.disconnected(now: s.runtime.now))
                    }
                    s.note(status)
                    if !json { render(force: true) }
                default: break
                }
            },
            onTick: { [self] s, now in
                pollingChanged(poller.tick(now: now))
                for ticket in scheduler.takeDue(now: now) {
                    if !json { render(force: false) }
                    scheduler.complete(ticket, success: true, now: now)
                }
                for poll in poller.takeDue(now: now) { send(poll) }
            },
            setup: { [self] s in
                s.runtime.withConnection { c, now in
                    if all {
                        listeners[c.listen(Path(validated: ["users"]), now: now)] = ""
                    } else {
                        for uid in users { listeners[c.listen(Path(validated: ["users", uid, "presence"]), now: now)] = uid }
                    }
                }
            })
    }

    /// Shows the records that changed.
    func apply(_ changed: [PresenceRecord]) {
        if json {
            for record in changed { emitJSON(record) }
        } else {
            render(force: !changed.isEmpty)
        }
    }

    /// Notes the start or the end of polling.
    func pollingChanged(_ change: WatchPoller.Change?) {
        guard let change else { return }
        switch change {
        case .started:
            console.note("connection failing: polling \(poller.endpoint.origin) every \(poller.policy.intervalMilliseconds / 1000) s")
        case .stopped:
            lastPollNote = ""
            console.note("connection stable: live updates only")
        }
        if !json { render(force: true) }
    }

    /// Sends a poll; its result comes back on the service thread.
    func send(_ poll: WatchPoller.Poll) {
        let runtime = session.runtime
        http.get(poll.request) { [self] result in
            runtime.perform { [self] _ in finish(poll.id, result) }
        }
    }

    /// Service thread: a poll's result.
    func finish(_ id: Int, _ result: HTTPGetResult) {
        let completion = poller.complete(id, result, now: session.runtime.now, board: &board)
        guard completion.known else { return }
        if let note = completion.note { console.note(note) }
        if let fatal = completion.fatal {
            console.error(fatal)
            session.end(Exit.connection, clean: false)
            return
        }
        apply(completion.changed)
        if !json, console.isTerminal, completion.changed.isEmpty { render(force: true) }
        notePolling()
    }

    /// While polling: "next update in N s", or "updating" while polls are out.
    func pollingText(now: Int64) -> String? { poller.statusText(now: now) }

    /// Off a terminal (or with --json), the polling state goes to standard error when a round ends.
    func notePolling() {
        guard json || !console.isTerminal, poller.idle, let text = pollingText(now: session.runtime.now),
              text != lastPollNote else { return }
        lastPollNote = text
        console.note(text)
    }

    func emitJSON(_ record: PresenceRecord) {
        var members: [(String, JSON)] = [("uid", .string(record.uid))]
        members.append(("online", record.online.map(JSON.bool) ?? .null))
        members.append(("lastSeen", record.lastSeen.map { .number(Double($0)) } ?? .null))
        members.append(("status", .string(formatter.status(online: record.online, lastSeen: record.lastSeen, now: serverNow))))
        members.append(("t", .number(Double(serverNow))))
        console.line(Console.json(members))
    }

    func rowText(_ record: PresenceRecord) -> String {
        let text = formatter.row(online: record.online, lastSeen: record.lastSeen, now: serverNow)
        return console.paint(text, record.online == true ? .green : .dim)
    }

    func render(force: Bool) {
        let now = session.runtime.now
        let pollText = pollingText(now: now)
        let interval = WatchRefresh.wordingInterval(Array(board.records.values), serverNow: serverNow,
                                                    countdown: pollText != nil && console.isTerminal)
        scheduler.register(WatchRefresh.wordingKind, RefreshPolicy(intervalMilliseconds: interval))
        scheduler.recordSuccess(WatchRefresh.wordingKind, now: now)
        let width = max(8, (board.order.map(\.count).max() ?? 0) + 2)
        if console.isTerminal {
            var lines: [String] = []
            for uid in board.order {
                guard let record = board.records[uid] else { continue }
                lines.append(uid.padding(toLength: width, withPad: " ", startingAt: 0) + rowText(record))
            }
            var status = connected ? "" : console.paint("  (not connected)", .yellow)
            if let pollText { status += console.paint("  polling: \(pollText)", .yellow) }
            lines.append(console.paint("\(board.order.count) user(s)", .dim) + status)
            var out = ""
            if drawnLines > 0 { out += "\u{1B}[\(drawnLines)A" }
            for line in lines { out += "\u{1B}[2K" + line + "\n" }
            if drawnLines > lines.count {
                for _ in lines.count..<drawnLines { out += "\u{1B}[2K\n" }
                out += "\u{1B}[\(drawnLines - lines.count)A"
            }
            drawnLines = lines.count
            console.raw(out)
        } else {
            for uid in board.order {
                guard let record = board.records[uid] else { continue }
                let text = formatter.row(online: record.online, lastSeen: record.lastSeen, now: serverNow)
                if shown[uid] != text {
                    shown[uid] = text
                    console.line(uid.padding(toLength: width, withPad: " ", startingAt: 0) + text)
                }
            }
        }
    }
}
