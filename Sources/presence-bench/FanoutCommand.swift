import ArgumentParser
import Dispatch
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// Loop-confined state of the fan-out scenario (touched only on the service thread).
private final class FanoutState: @unchecked Sendable {
    enum Role { case writer(Int), watcher(Int) }

    let users: Int
    let watchers: Int
    let subs: Int
    let rate: Double
    let field: String?
    var roles: [WebSocketConnectionID: Role] = [:]
    var writerConn: [WebSocketConnectionID]
    var writerNextR: [Int]
    /// Per writer: FIFO of send times of unacknowledged puts (acks come in order).
    var writerInflight: [[UInt64]]
    var writerInflightHead: [Int]
    var seq: [Int]
    var lastSend: [UInt64]
    var prevSend: [UInt64]
    /// Watchers per user, for the expected event count.
    var watchersOfUser: [Int]
    /// Per watcher × subscription: last seen (online: -1 unknown/null, 0, 1), lastSeen ms, field value.
    var stOnline: [Int8]
    var stLastSeen: [Int]
    var stField: [Int]
    var authOK = 0
    var listensOK = 0
    var failures: [String: Int] = [:]

    var writing = false
    var measuring = false
    var startMicros: UInt64 = 0
    var writesSent = 0
    var writesAcked = 0
    var writesFailed = 0
    var measuredWrites = 0
    var expectedEvents = 0
    var events = 0
    var eventsMeasured = 0
    var eventsUnmatched = 0
    var eventsLate = 0
    var perSecond: [Int] = []
    var latency = LatencySamples(reserve: 1 << 20)
    var ackLatency = LatencySamples(reserve: 1 << 18)
    var userCursor = 0
    var closedUnexpectedly = 0
    let ready = Atomic<Int>(0)
    let failedConns = Atomic<Int>(0)

    init(users: Int, watchers: Int, subs: Int, rate: Double, field: String?) {
        self.users = users
        self.watchers = watchers
        self.subs = subs
        self.rate = rate
        self.field = field
        writerConn = .init(repeating: 0, count: users)
        writerNextR = .init(repeating: 2, count: users)
        writerInflight = .init(repeating: [], count: users)
        writerInflightHead = .init(repeating: 0, count: users)
        seq = .init(repeating: 0, count: users)
        lastSend = .init(repeating: 0, count: users)
        prevSend = .init(repeating: 0, count: users)
        watchersOfUser = .init(repeating: 0, count: users)
        stOnline = .init(repeating: -1, count: watchers * subs)
        stLastSeen = .init(repeating: 0, count: watchers * subs)
        stField = .init(repeating: 0, count: watchers * subs)
        for w in 0..<watchers { for j in 0..<subs { watchersOfUser[user(w, j)] += 1 } }
    }

    /// User watched by watcher `w` in its subscription slot `j`.
    @inline(__always) func user(_ w: Int, _ j: Int) -> Int { (w * subs + j) % users }
    /// Slot of user `u` in watcher `w`'s subscriptions, if it watches `u`.
    @inline(__always) func slot(_ w: Int, _ u: Int) -> Int? {
        let j = ((u - (w * subs) % users) + users) % users
        return j < subs ? j : nil
    }

    func value(online: Bool, now: UInt64) -> String {
        if let field { return #"{"online":\#(online),"lastSeen":{".sv":"timestamp"},"\#(field)":\#(now)}"# }
        return #"{"online":\#(online),"lastSeen":{".sv":"timestamp"}}"#
    }

    /// Sends the writes that are due at `now` (called from the tick).
    func tick(_ client: WebSocketClient, now: UInt64) {
        guard writing else { return }
        let due = Int(rate * Double(now - startMicros) / 1e6)
        var budget = 5000  // bounded burst per tick
        while writesSent < due, budget > 0 {
            budget -= 1
            let u = userCursor
            userCursor = (userCursor + 1) % users
            let id = writerConn[u]
            guard id != 0 else { continue }
            seq[u] += 1
            prevSend[u] = lastSend[u]
            let t = monotonicMicros()
            lastSend[u] = t
            let r = writerNextR[u]
            writerNextR[u] += 1
            writerInflight[u].append(t)
            client.send(id, text: Wire.put(r: r, path: "/users/user\(u)/presence", valueJSON: value(online: seq[u] % 2 == 1, now: t)))
            writesSent += 1
            if measuring {
                measuredWrites += 1
                expectedEvents += watchersOfUser[u]
            }
        }
    }

    func onMessage(_ id: WebSocketConnectionID, _ m: WebSocketMessage) {
        let now = monotonicMicros()
        let scan = FrameScan(bytes: m.bytes)
        guard let role = roles[id] else { return }
        if let r = scan.requestNumber {
            let ok = scan.status == "ok"
            switch role {
            case .writer(let u):
                if r == 1 {
                    if ok { authOK += 1; ready.wrappingAdd(1, ordering: .relaxed) } else { failures["writer auth \(scan.status ?? "?")", default: 0] += 1 }
                } else {
                    let h = writerInflightHead[u]
                    if h < writerInflight[u].count {
                        if measuring { ackLatency.add(now - writerInflight[u][h]) }
                        writerInflightHead[u] = h + 1
                        if h + 1 == writerInflight[u].count { writerInflight[u].removeAll(keepingCapacity: true); writerInflightHead[u] = 0 }
                    }
                    if ok { writesAcked += 1 } else { writesFailed += 1; failures["put \(scan.status ?? "?")", default: 0] += 1 }
                }
            case .watcher:
                if r == 1 {
                    if ok { authOK += 1 } else { failures["watcher auth \(scan.status ?? "?")", default: 0] += 1 }
                } else if ok {
                    listensOK += 1
                    ready.wrappingAdd(1, ordering: .relaxed)
                } else {
                    failures["listen \(scan.status ?? "?")", default: 0] += 1
                }
            }
            return
        }
        guard case .watcher(let w) = role, scan.isDataPush, let pathStart = scan.find(#""p":""#) else { return }
        // Path: "users/userN/presence" (leading slash optional).
        var i = pathStart
        if i < m.bytes.count, m.bytes[i] == UInt8(ascii: "/") { i += 1 }
        guard let ui = scan.find("users/user", from: i), ui == i + 10, let u = scan.int(at: ui), u >= 0, u < users,
              let j = slot(w, u) else { return }
        let k = w * subs + j
        var online: Int8 = -1
        if let o = scan.find(#""online":"#) { online = m.bytes[o] == UInt8(ascii: "t") ? 1 : 0 }
        stOnline[k] = online
        if let ls = scan.find(#""lastSeen":"#) { stLastSeen[k] = scan.int(at: ls) ?? 0 }
        var fieldValue: Int?
        if field != nil, let f = findField(scan) { fieldValue = scan.int(at: f) }
        if let fv = fieldValue { stField[k] = fv }
        events += 1
        guard measuring, online >= 0 else { return }
        eventsMeasured += 1
        let sec = Int((now - startMicros) / 1_000_000)
        while perSecond.count <= sec { perSecond.append(0) }
        perSecond[sec] += 1
        if let fv = fieldValue, fv > 0, UInt64(fv) <= now {
            latency.add(now - UInt64(fv))
        } else if seq[u] > 0, (seq[u] % 2 == 1) == (online == 1), lastSend[u] > 0 {
            latency.add(now - lastSend[u])
        } else if seq[u] > 1, prevSend[u] > 0 {
            eventsLate += 1
            latency.add(now - prevSend[u])
        } else {
            eventsUnmatched += 1
        }
    }

    private var fieldNeedle: [UInt8] = []
    private func findField(_ scan: FrameScan) -> Int? {
        if fieldNeedle.isEmpty, let field { fieldNeedle = Array("\"\(field)\":".utf8) }
        let b = scan.bytes
        let n = fieldNeedle.count
        guard b.count >= n else { return nil }
        var i = 0
        while i <= b.count - n {
            if b[i] == fieldNeedle[0] {
                var j = 1
                while j < n && b[i + j] == fieldNeedle[j] { j += 1 }
                if j == n { return i + n }
            }
            i += 1
        }
        return nil
    }

    /// Compares every watcher's state with each user's final write. Returns (checked, wrong, inconsistentLastSeen).
    func verify() -> (checked: Int, wrong: Int, lastSeenDisagree: Int, examples: [String]) {
        var wrong = 0
        var disagree = 0
        var checked = 0
        var examples: [String] = []
        var firstLastSeen = [Int](repeating: -1, count: users)
        for w in 0..<watchers {
            for j in 0..<subs {
                let u = user(w, j)
                guard seq[u] > 0 else { continue }
                checked += 1
                let k = w * subs + j
                let wantOnline: Int8 = seq[u] % 2 == 1 ? 1 : 0
                var ok = stOnline[k] == wantOnline
                if field != nil, ok { ok = UInt64(stField[k]) == lastSend[u] }
                if !ok {
                    wrong += 1
                    if examples.count < 5 { examples.append("watcher\(w) user\(u): online \(stOnline[k]) want \(wantOnline)") }
                }
                if firstLastSeen[u] < 0 { firstLastSeen[u] = stLastSeen[k] } else if firstLastSeen[u] != stLastSeen[k] { disagree += 1 }
            }
        }
        return (checked, wrong, disagree, examples)
    }
}

/// `presence-bench fanout`: writers flap presence, watchers listen; latency and delivery.
struct FanoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "U writers flap /users/userI/presence at a total rate R; W watchers each listen to S users. Reports write-to-watcher latency, events/s and a final-state check."
    )

    @OptionGroup var server: ServerOptions
    @Option(help: "Writer connections (one per user).") var users = 100
    @Option(help: "Watcher connections.") var watchers = 100
    @Option(help: "Users each watcher listens to.") var subscriptions = 10
    @Option(help: "Total writes per second.") var rate: Double = 1000
    @Option(help: "Measured seconds of writing.") var duration: Double = 10
    @Option(help: "Seconds of writing before measuring.") var warmup: Double = 1
    @Option(help: "Extra field carrying the writer's monotonic send time (µs) in each value, e.g. bench. Omit if the rules validate the node shape; latency then comes from client-side (user, sequence) matching.")
    var payloadField: String?
    @Option(help: "Seconds to wait for acks and deliveries after writing stops.") var settle: Double = 5
    @Option(help: "Give up on the connect phase after this many seconds.") var timeout: Double = 120

    func run() throws {
        let endpoint = try server.endpoint()
        guard users > 0, watchers >= 0, subscriptions > 0, subscriptions <= users else {
            throw ValidationError("need users > 0 and 0 < subscriptions <= users")
        }
        guard users + watchers < 20_000 else { throw ValidationError("users + watchers must stay below the fd limit (20000)") }
        guard rate > 0, duration > 0, duration <= 3600 else { throw ValidationError("bad --rate/--duration") }
        let st = FanoutState(users: users, watchers: watchers, subs: subscriptions, rate: rate, field: payloadField)
        let client = WebSocketClient(configuration: server.clientConfiguration(tickMicros: 1000)) { client, event in
            switch event {
            case .connected(let id):
                guard let role = st.roles[id] else { return }
                switch role {
                case .writer(let u):
                    st.writerConn[u] = id
                    client.send(id, text: Wire.auth(r: 1, uid: "user\(u)"))
                case .watcher(let w):
                    client.send(id, text: Wire.auth(r: 1, uid: "watcher\(w)"))
                    for j in 0..<st.subs {
                        client.send(id, text: Wire.listen(r: 2 + j, path: "/users/user\(st.user(w, j))/presence"))
                    }
                }
            case .connectFailed(_, let reason):
                st.failures["connect: \(reason)", default: 0] += 1
                st.failedConns.wrappingAdd(1, ordering: .relaxed)
            case .message(let id, let m):
                st.onMessage(id, m)
            case .closed(let id, let info):
                if !info.closedLocally && !info.byShutdown && !info.aborted {
                    st.closedUnexpectedly += 1
                    if case .writer(let u) = st.roles[id] { st.writerConn[u] = 0 }
                }
            case .tick(let now):
                st.tick(client, now: now)
            }
        }
        try client.start()
        let sources = (0..<(users + watchers)).map { server.source($0) }
        let (u, w) = (users, watchers)
        let m = runFanoutPhases(
            client: client, state: st, serverPid: server.serverPid, readyTarget: users + watchers * subscriptions,
            readyName: "auths+listens", timeout: timeout, warmup: warmup, duration: duration, settle: settle,
            connectAll: {
                for i in 0..<u { st.roles[client.connect(to: endpoint, sourceAddress: sources[i])] = .writer(i) }
                for i in 0..<w { st.roles[client.connect(to: endpoint, sourceAddress: sources[u + i])] = .watcher(i) }
            })
        var fields: [(String, JSON)] = [
            ("scenario", .string("fanout")),
            ("url", .string(endpoint.description)),
            ("users", .int(users)), ("watchers", .int(watchers)), ("subscriptions", .int(subscriptions)),
            ("rate", .double(rate)), ("duration_s", .double(m.writeSeconds)),
            ("setup_s", .double(m.setupSeconds)), ("ready", .int(m.readyCount)),
            ("ready_target", .int(users + watchers * subscriptions)),
        ]
        fields += m.stateFields + m.finalStateFields
        printResult(fields)
        if !m.ok { throw ExitCode(2) }
    }
}

extension FanoutState: FanoutRunState {
    var readyCount: Int { ready.load(ordering: .relaxed) }
    var failedConnectCount: Int { failedConns.load(ordering: .relaxed) }
    var extraFields: [(String, JSON)] { [("writes_failed", .int(writesFailed))] }
    var latencySource: String { field.map { "payload field \($0)" } ?? "client-side (user, sequence) match" }
}

