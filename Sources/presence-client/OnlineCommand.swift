import ArgumentParser
import Foundation
import PresenceClient
import PresenceCore

struct OnlineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "online",
        abstract: "List who is online, as a chat app's \"Refresh users\" button does, within the server's refresh limit.",
        discussion: """
            The list is kept in a cache file per server, database and user and refreshed only when it is older than --max-age (default 30 minutes) or with --refresh. Before a refresh the command reads the user's refreshOnlineUsers limit: with uses left it refreshes and prints "Refreshes: N left of L" (or "Refreshes: unlimited (tier)"); in a cooldown it prints "Time remaining m:ss" (with a progress bar counting down on a terminal) and, with --wait, refreshes when the cooldown ends.

            Output: "N online (refreshed just now)" or "N online (cached 12m ago)", then one row per user: uid, "● Online", "Last seen …". With --json, one object: {"source","fetchedAt","age","users":[{"uid","online","lastSeen","status","lastSeenText"}],"limit","rateLimited","remainingCooldown"}.

            Exit codes: 0 listed; 5 refresh limit reached (cooldown, without --wait; the cached list is shown first if there is one); 2 connection failed; 3 refused; 4 credential refused.

            Examples:
              presence-client online --uid bob
              presence-client online --uid bob --claim subscription=lite --refresh
              presence-client online --uid bob --refresh --wait
              presence-client online --uid bob --json --cache /tmp/online.json
            """)

    @Flag(help: "Refresh now even when the cached list is fresh (still within the refresh limit).")
    var refresh = false

    @Flag(help: "In a cooldown, wait for it to end (counting down) and then refresh.")
    var wait = false

    @Option(help: "Refresh when the cached list is older than this many seconds.")
    var maxAge: Int64 = OnlineRefresh.defaultMaxAgeSeconds

    @Option(help: "The cache file (default: one per server, database and user under $XDG_CACHE_HOME/presence-client or ~/.cache/presence-client).")
    var cache: String?

    @Flag(help: "Print one JSON object instead of the table.")
    var json = false

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if maxAge < 0 { throw ValidationError("--max-age must be 0 or more seconds") }
    }

    /// The cache file and the file of the refresh scheduler next to it.
    func files() -> (cache: String, schedule: String) {
        let cachePath: String
        if let cache {
            cachePath = cache
        } else {
            let key = CacheFile.key(server: ConnectionOptions.normalizedServer(connection.server),
                                    namespace: connection.ns, uid: connection.uid)
            cachePath = CacheFile.directory(environment: ProcessInfo.processInfo.environment) + "/\(key).online-users.json"
        }
        let base = cachePath.hasSuffix(".json") ? String(cachePath.dropLast(5)) : cachePath
        return (cachePath, base + ".refresh.json")
    }

    func run() throws {
        let (cachePath, schedulePath) = files()
        let now = ClientRuntime.realTimeMilliseconds()
        var scheduler = RefreshScheduler(store: FileRefreshStore(path: schedulePath), concurrencyLimit: 1)
        scheduler.register(OnlineRefresh.kind, RefreshPolicy(intervalMilliseconds: maxAge * 1000))
        let cached = OnlineUsersCache.load(path: cachePath)
        let view = OnlineView(console: Console(), json: json)
        switch OnlineRefresh.start(hasCache: cached != nil, stale: scheduler.shouldRefresh(OnlineRefresh.kind, now: now),
                                   force: refresh) {
        case .showCache:
            view.show(cached!, fromCache: true, now: now, status: nil)
        case .refresh:
            let refresher = OnlineRefresher(configuration: try connection.configuration(failFast: true),
                                            scheduler: scheduler, cached: cached, cachePath: cachePath,
                                            wait: wait, view: view)
            let code = refresher.run()
            if code != 0 { throw ExitCode(code) }
        }
    }
}

/// Prints the list, the uses line and the countdown.
struct OnlineView {
    let console: Console
    let json: Bool
    let formatter = LastSeenFormatter(timeZoneOffsetSeconds: Int64(TimeZone.current.secondsFromGMT()))

    /// The list (human: header, rows, uses line; JSON: one object).
    func show(_ list: OnlineUsersCache, fromCache: Bool, now: Int64, status: FeatureLimitStatus?,
              cooldownMilliseconds: Int64? = nil) {
        let serverNow = now + list.serverTimeOffset
        if json {
            var members: [(String, JSON)] = [
                ("source", .string(fromCache ? "cache" : "server")),
                ("fetchedAt", .number(Double(list.fetchedAt))),
                ("age", .number(Double(list.age(now: now)) / 1000)),
                ("users", .array(list.users.map { OnlineRefresh.userJSON($0, formatter: formatter, serverNow: serverNow) })),
            ]
            members += limitMembers(status: status, cooldownMilliseconds: cooldownMilliseconds)
            console.line(Console.json(members))
            return
        }
        console.line(OnlineRefresh.header(count: list.users.count, fromCache: fromCache, ageMilliseconds: list.age(now: now)))
        let width = OnlineRefresh.uidWidth(list.users)
        for record in list.users {
            let row = OnlineRefresh.row(record, width: width, formatter: formatter, serverNow: serverNow)
            console.line(console.color ? colored(row, record) : row)
        }
        if let status, cooldownMilliseconds == nil { console.line(OnlineRefresh.usesLine(status)) }
    }

    /// The JSON object when there is no list to show (cooldown and no cache).
    func showNothing(status: FeatureLimitStatus?, cooldownMilliseconds: Int64?) {
        guard json else { return }
        let members: [(String, JSON)] = [("source", .string("none")), ("fetchedAt", .null), ("age", .null), ("users", .array([]))]
        console.line(Console.json(members + limitMembers(status: status, cooldownMilliseconds: cooldownMilliseconds)))
    }

    private func limitMembers(status: FeatureLimitStatus?, cooldownMilliseconds: Int64?) -> [(String, JSON)] {
        [
            ("limit", status.map(OnlineRefresh.statusJSON) ?? .null),
            ("rateLimited", .bool(cooldownMilliseconds != nil)),
            ("remainingCooldown", .number(Double(cooldownMilliseconds ?? 0) / 1000)),
        ]
    }

    private func colored(_ row: String, _ record: PresenceRecord) -> String {
        guard let range = row.range(of: record.online == false ? "○ Offline" : "● Online") else { return row }
        return String(row[..<range.lowerBound]) + console.paint(String(row[range]), record.online == false ? .dim : .green)
            + String(row[range.upperBound...])
    }
}

/// The refresh, on the service thread: read the limit status, then the list (and the status again),
/// or count a cooldown down.
final class OnlineRefresher: @unchecked Sendable {
    let session: Session
    var scheduler: RefreshScheduler
    let cached: OnlineUsersCache?
    let cachePath: String
    let wait: Bool
    let view: OnlineView
    var console: Console { session.console }

    private var statusGet: GetID?
    private var usersGet: GetID?
    private var afterGet: GetID?
    private var ticket: RefreshScheduler.Ticket?
    /// The status read before the refresh (nil: unknown).
    private var status: FeatureLimitStatus?
    /// Set when the list was refused with rate_limited: the status read next explains it.
    private var refusal: RequestFailure?
    private var fresh: OnlineUsersCache?
    private var countdown: Countdown?
    private var drawnSecond: Int64 = -1
    private var countdownDrawn = false
    private var shownCache = false
    private var cooldowns = 0

    init(configuration: ClientConfiguration, scheduler: RefreshScheduler, cached: OnlineUsersCache?, cachePath: String,
         wait: Bool, view: OnlineView) {
        session = Session(configuration: configuration)
        self.scheduler = scheduler
        self.cached = cached
        self.cachePath = cachePath
        self.wait = wait
        self.view = view
    }

    func run() -> Int32 {
        session.run(
            onEvent: { [self] s, event in
                switch event {
                case .getCompleted(let id, let value, let failure):
                    if id == statusGet { statusRead(value, failure) }
                    else if id == usersGet { listRead(value, failure) }
                    else if id == afterGet { finish(after: failure == nil ? FeatureLimitStatus(json: value) : nil) }
                case .fatal:
                    if let cached, !shownCache {
                        shownCache = true
                        view.show(cached, fromCache: true, now: s.runtime.now, status: nil)
                    }
                case .status(let status):
                    s.note(status)
                default: break
                }
            },
            onTick: { [self] _, now in tick(now) },
            onSignal: { [self] s, signal in
                if countdownDrawn { console.raw("\n") }
                s.end(signal == SIGINT ? Exit.interrupted : Exit.ok)
            },
            setup: { [self] _ in readStatus() })
    }

    private func readStatus() {
        statusGet = session.runtime.withConnection { c, now in c.get(OnlineRefresh.statusPath, now: now) }
    }

    private func statusRead(_ value: JSON?, _ failure: RequestFailure?) {
        statusGet = nil
        if let failure, failure.isCredentialProblem {
            console.error("get \(OnlineRefresh.statusPath): \(failure)")
            return session.end(Exit.auth)
        }
        // Unreadable (older server, rules): unknown; the refresh itself is the judge.
        status = failure == nil ? FeatureLimitStatus(json: value) : nil
        let decision: OnlineRefresh.Decision
        if let refusal {
            console.note("get \(OnlineRefresh.usersPath): \(refusal)")
            decision = OnlineRefresh.afterRefusal(status: status, message: refusal.message)
            self.refusal = nil
            if decision == .blocked {
                if let cached, !shownCache {
                    shownCache = true
                    view.show(cached, fromCache: true, now: session.runtime.now, status: nil)
                }
                console.note("refresh limit reached for good: \(refusal.message)")
                return session.end(Exit.rateLimited)
            }
        } else {
            decision = status.map(OnlineRefresh.decide) ?? .refresh
        }
        switch decision {
        case .refresh:
            startRefresh()
        case .cooldown(let remaining, let total):
            enterCooldown(remaining: remaining, total: total)
        case .blocked:
            break  // handled with the refusal above
        }
    }

    private func startRefresh() {
        let now = session.runtime.now
        ticket = scheduler.start(OnlineRefresh.kind, now: now)
        session.runtime.withConnection { c, now in
            usersGet = c.get(OnlineRefresh.usersPath, now: now)
            // Read the status again after the use (same connection, so in order): the uses left.
            if let status, !status.unlimited { afterGet = c.get(OnlineRefresh.statusPath, now: now) }
        }
    }

    private func listRead(_ value: JSON?, _ failure: RequestFailure?) {
        usersGet = nil
        let now = session.runtime.now
        if let ticket { scheduler.complete(ticket, success: failure == nil, now: now) }
        ticket = nil
        if let failure {
            if failure.isRateLimited {
                // Another device used the last refresh first: the status read next says how long.
                refusal = failure
                if afterGet == nil { readStatus() } else { statusGet = afterGet; afterGet = nil }
                return
            }
            console.error("get \(OnlineRefresh.usersPath): \(failure)")
            if let cached { view.show(cached, fromCache: true, now: now, status: nil) }
            return session.end(OneShot.failureCode(failure))
        }
        let list = OnlineUsersCache(fetchedAt: now, serverTimeOffset: session.runtime.connection.serverTimeOffset,
                                    users: OnlineUsersCache.users(from: value))
        do {
            try list.save(path: cachePath)
        } catch {
            console.note("warning: cannot write the cache \(cachePath): \(error)")
        }
        fresh = list
        if afterGet == nil { finish(after: status) }
    }

    /// Prints the refreshed list with the uses line (from the status read after the refresh, else
    /// the one before, less one use).
    private func finish(after: FeatureLimitStatus?) {
        afterGet = nil
        guard let fresh else { return }
        var shown = after
        if shown == nil || shown?.unconfigured == true && status?.unconfigured == false {
            shown = status.map(OnlineRefresh.afterOneUse)
        }
        view.show(fresh, fromCache: false, now: session.runtime.now, status: shown)
        session.end(Exit.ok)
    }

    private func enterCooldown(remaining: Int64, total: Int64?) {
        let now = session.runtime.now
        cooldowns += 1
        if !shownCache, let cached, !(wait && view.json) {
            shownCache = true
            if !view.json { view.show(cached, fromCache: true, now: now, status: nil, cooldownMilliseconds: remaining) }
        }
        let countdown = Countdown(now: now, remainingMilliseconds: remaining, totalMilliseconds: total)
        guard wait, cooldowns <= 20 else {
            if view.json {
                if let cached {
                    view.show(cached, fromCache: true, now: now, status: status, cooldownMilliseconds: remaining)
                } else {
                    view.showNothing(status: status, cooldownMilliseconds: remaining)
                }
            } else {
                console.line(countdown.line(now: now))
                console.note("refresh limit reached; run with --wait to wait for it")
            }
            return session.end(Exit.rateLimited)
        }
        self.countdown = countdown
        drawnSecond = -1
        if !view.json, !console.isTerminal { console.line(countdown.line(now: now)) }
        tick(now)
    }

    private func tick(_ now: Int64) {
        guard let countdown else { return }
        if countdown.isOver(now: now) {
            self.countdown = nil
            if countdownDrawn {
                console.raw("\r\u{1B}[2K" + countdown.lineWithBar(now: now) + "\n")
                countdownDrawn = false
            }
            readStatus()  // the server decides whether the cooldown is over
            return
        }
        guard !view.json, console.isTerminal else { return }
        let second = (countdown.remaining(now: now) + 999) / 1000
        if second != drawnSecond {
            drawnSecond = second
            countdownDrawn = true
            console.raw("\r\u{1B}[2K" + countdown.lineWithBar(now: now))
        }
    }
}
