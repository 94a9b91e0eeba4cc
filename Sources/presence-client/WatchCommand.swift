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

            After 3 consecutive failed connection attempts the rows are also polled (a one-shot read of each user every 15 s, jittered, sent whenever a connection is up) until a connection stays up for 30 s; the footer (or standard error, off a terminal) shows "next update in N s".

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

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if users.isEmpty, !all { throw ValidationError("name the users to watch, or use --all") }
        if all, !users.isEmpty { throw ValidationError("--all watches every user; do not name users with it") }
        for user in users where !Path.isValidKey(user) {
            throw ValidationError("\(user) is not a valid user id")
        }
    }

    func run() throws {
        let watcher = Watcher(users: users, all: all, json: json, configuration: try connection.configuration(failFast: true))
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
    /// Wording redraws and, after repeated connection failures, polls.
    var scheduler = RefreshScheduler(store: InMemoryRefreshStore(), concurrencyLimit: 4)
    var health = ConnectionHealth()
    /// Polls out: the read → its ticket.
    var polls: [GetID: RefreshScheduler.Ticket] = [:]
    var pollUids: [RefreshKind: String?] = [:]
    var lastPollNote = ""
    var console: Console { session.console }

    init(users: [String], all: Bool, json: Bool, configuration: ClientConfiguration) {
        session = Session(configuration: configuration)
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
                case .getCompleted(let id, let value, let failure):
                    guard let ticket = polls.removeValue(forKey: id) else { return }
                    scheduler.complete(ticket, success: failure == nil, now: s.runtime.now)
                    if let failure {
                        s.console.note("poll \(WatchRefresh.pollPath(pollUids[ticket.kind] ?? nil)): \(failure)")
                    } else if let value, let uid = pollUids[ticket.kind] {
                        apply(uid.map { board.apply(uid: $0, presence: value) } ?? board.apply(users: value))
                    }
                    notePolling()
                case .listenFailed(_, let path, let failure):
                    s.console.error("listen \(path): \(failure)")
                    s.end(OneShot.failureCode(failure))
                case .status(let status):
                    if case .connected = status {
                        connected = true
                        health.connected(now: s.runtime.now)
                    } else if case .disconnected = status {
                        connected = false
                        health.disconnected(now: s.runtime.now)
                        updatePolling()
                    }
                    s.note(status)
                    if !json { render(force: true) }
                default: break
                }
            },
            onTick: { [self] s, now in
                health.tick(now: now)
                updatePolling()
                for ticket in scheduler.takeDue(now: now) {
                    if ticket.kind == WatchRefresh.wordingKind {
                        if !json { render(force: false) }
                        scheduler.complete(ticket, success: true, now: now)
                    } else {
                        let path = WatchRefresh.pollPath(pollUids[ticket.kind] ?? nil)
                        polls[s.runtime.withConnection { c, now in c.get(path, now: now) }] = ticket
                    }
                }
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

    /// Starts or stops polling as the connection's health says.
    func updatePolling() {
        let polling = health.polling
        guard polling != !pollUids.isEmpty else { return }
        if polling {
            let targets: [String?] = all ? [nil] : users.map { Optional($0) }
            for uid in targets {
                let kind = WatchRefresh.pollKind(uid)
                pollUids.updateValue(uid, forKey: kind)
                scheduler.register(kind, WatchRefresh.pollPolicy)
            }
            console.note("connection failing: polling every \(WatchRefresh.pollPolicy.intervalMilliseconds / 1000) s")
        } else {
            for kind in pollUids.keys {
                scheduler.cancel(kind)
                scheduler.unregister(kind)
            }
            pollUids = [:]
            polls = [:]
            lastPollNote = ""
            console.note("connection stable: live updates only")
        }
        if !json { render(force: true) }
    }

    /// While polling: "next update in N s", or "updating" while polls are out.
    func pollingText(now: Int64) -> String? {
        guard !pollUids.isEmpty else { return nil }
        var next: Int64?
        for kind in pollUids.keys where !scheduler.isRunning(kind) {
            let t = scheduler.nextRefresh(kind, now: now)
            if next == nil || t < next! { next = t }
        }
        let running = pollUids.keys.contains { scheduler.isRunning($0) }
        return WatchRefresh.pollText(nextUpdate: next, now: now, running: running)
    }

    /// Off a terminal (or with --json), the polling state goes to standard error when a round ends.
    func notePolling() {
        guard json || !console.isTerminal, polls.isEmpty, let text = pollingText(now: session.runtime.now),
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
